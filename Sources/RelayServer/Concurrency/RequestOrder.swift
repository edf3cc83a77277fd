import PushRelayProtocol

/// The order in which one connection's pipelined requests take effect: a value that says which requests may start,
/// given what each does to the tenant's state; the connection's handler starts them.
///
/// The rule, as Protocol/README.md states it: a request starts once every earlier request that changes state has
/// taken effect, and a request that changes state starts once every earlier request has. Requests that only read
/// run side by side. A request takes effect when it is answered, except a SEND, which takes effect when its job is
/// stored (before it waits for outcomes): a SEND only reads the state it depends on (the devices, preferences,
/// mutes and presence of its audience), so SENDs run side by side, after the changes sent before them.
struct RequestOrder {
    /// What a request does to the tenant's state, as far as the order goes.
    enum Access: Equatable, Sendable {
        /// It changes state later requests may read (a device, a preference, a mute, presence, a job's state).
        case changes
        /// It reads state only, or stores a job without changing what other requests read (SEND).
        case reads

        /// The access of a request of `kind`. PING, GOODBYE and the results stream's requests never wait in the
        /// order (their connection answers them at once) and change nothing another request reads.
        init(_ kind: RequestKind) {
            switch kind {
            case .registerDevice, .unregisterDevice, .setPreferences, .setMute, .clearMute, .setPresence, .cancelJob:
                self = .changes
            case .listDevices, .send, .jobStatus, .queryDeliveries, .listNotificationTypes, .getPreferences,
                .listMutes, .hello, .ping, .goodbye, .subscribeResults, .unsubscribeResults:
                self = .reads
            }
        }
    }

    private struct Entry {
        let id: UInt32
        let access: Access
        var started: Bool
    }

    /// The requests that have not taken effect yet, in arrival order.
    private var pending: [Entry] = []

    /// An empty order.
    init() {}

    /// How many requests have not taken effect yet.
    var count: Int { pending.count }

    /// Adds request `id`, arrived after every request added before; returns whether it may start now.
    mutating func arrive(_ id: UInt32, access: Access) -> Bool {
        let mayStart =
            switch access {
            case .changes: pending.isEmpty
            case .reads: !pending.contains { $0.access == .changes }
            }
        pending.append(Entry(id: id, access: access, started: mayStart))
        return mayStart
    }

    /// Request `id` took effect (or ended without); returns the requests that may start now, in arrival order.
    /// An id that is not pending (it took effect already) changes nothing.
    mutating func tookEffect(_ id: UInt32) -> [UInt32] {
        guard let index = pending.firstIndex(where: { $0.id == id }) else { return [] }
        pending.remove(at: index)
        var starting: [UInt32] = []
        for index in pending.indices {
            let entry = pending[index]
            if entry.access == .changes {
                // A change starts only first in line; nothing after it starts before it takes effect.
                if index == 0, !entry.started {
                    pending[index].started = true
                    starting.append(entry.id)
                }
                break
            }
            if !entry.started {
                pending[index].started = true
                starting.append(entry.id)
            }
        }
        return starting
    }
}
