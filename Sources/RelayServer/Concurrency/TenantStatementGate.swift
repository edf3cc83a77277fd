import NIOCore
import PushRelayProtocol
import Synchronization

/// Bounds the database work each tenant's requests do at once: at most ``limit`` of one tenant's requests (or
/// steps of a SEND that waits) use the database together; the others wait their turn, in the order they came.
/// So one tenant's heavy reads or floods of writes take at most ``limit`` of the pool's connections, and every
/// other tenant finds the rest free (`db_statements_per_tenant`, default 4 of a pool of 20).
final class TenantStatementGate: Sendable {
    /// The most statements one tenant runs at once.
    let limit: Int
    private let slots = Mutex<[String: TenantSlots]>([:])

    /// A gate letting each tenant run `limit` (at least 1) statements at once.
    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Runs `body` once `tenant` has a free slot, and frees the slot after it.
    func run<Result>(
        tenant: String, _ body: () async throws(ProtocolError) -> Result
    ) async throws(ProtocolError) -> Result {
        await enter(tenant)
        defer { leave(tenant) }
        return try await body()
    }

    private func enter(_ tenant: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let admitted = slots.withLock { slots in
                slots[tenant, default: TenantSlots()].enter(continuation, limit: limit)
            }
            if admitted { continuation.resume() }
        }
    }

    private func leave(_ tenant: String) {
        let next = slots.withLock { slots -> CheckedContinuation<Void, Never>? in
            let next = slots[tenant]?.leave()
            if slots[tenant]?.running == 0 { slots[tenant] = nil }
            return next
        }
        next?.resume()
    }
}

/// One tenant's slots of a ``TenantStatementGate``: how many run, and who waits, first come first served.
struct TenantSlots {
    /// Statements running.
    private(set) var running = 0
    /// Callers waiting for a slot.
    private var waiting = CircularBuffer<CheckedContinuation<Void, Never>>()

    /// Takes a slot for `waiter` (`true`: go now) or queues it when `limit` run already.
    mutating func enter(_ waiter: CheckedContinuation<Void, Never>, limit: Int) -> Bool {
        guard running >= limit else {
            running += 1
            return true
        }
        waiting.append(waiter)
        return false
    }

    /// Frees a slot: handed to the first waiter (returned, to resume), else counted free.
    mutating func leave() -> CheckedContinuation<Void, Never>? {
        if let next = waiting.popFirst() { return next }
        running -= 1
        return nil
    }
}
