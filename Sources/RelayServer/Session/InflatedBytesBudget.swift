import Synchronization

/// The bytes of request bodies, after decompression, that the in-flight requests of all connections hold
/// (`max_inflight_bytes`): a request holds its body's inflated size from the moment its frame is admitted, before
/// it is decompressed, until its answer is written.
///
/// A connection whose next request does not fit waits, its socket not read, until some are given back. Each
/// connection may still hold ``ConnectionBounds/assuredInflightBytes`` whatever the others hold, so that small
/// requests are not held up behind others' large ones, and a request is always taken when nothing is held. So the
/// bodies held in the process stay under `limit` plus `assuredInflightBytes` per connection (or one request's body
/// when that is larger).
final class InflatedBytesBudget: Sendable {
    private struct State {
        var held = 0
        var waiters: [@Sendable () -> Void] = []
    }

    /// The bytes all connections may hold together.
    let limit: Int
    private let state = Mutex(State())

    /// A budget of `limit` bytes for the whole process.
    init(limit: Int) {
        self.limit = limit
    }

    /// The bytes held now.
    var held: Int {
        state.withLock { $0.held }
    }

    /// Takes `bytes` for a connection that holds `connectionHeld` already: `true` when they fit under the limit,
    /// when nothing is held at all, or when the connection stays within its assured bytes; else nothing is taken
    /// and `wake` is called once, when bytes are next given back.
    func take(_ bytes: Int, connectionHeld: Int, wake: @escaping @Sendable () -> Void) -> Bool {
        state.withLock { state in
            let fits =
                state.held + bytes <= limit || state.held == 0
                || connectionHeld + bytes <= ConnectionBounds.assuredInflightBytes
            if fits {
                state.held += bytes
            } else {
                state.waiters.append(wake)
            }
            return fits
        }
    }

    /// Gives back `bytes` and wakes every connection that waited for them.
    func release(_ bytes: Int) {
        guard bytes > 0 else { return }
        let waiters = state.withLock { state in
            state.held -= bytes
            defer { state.waiters = [] }
            return state.waiters
        }
        for wake in waiters { wake() }
    }
}
