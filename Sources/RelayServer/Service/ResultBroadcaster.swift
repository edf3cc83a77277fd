import Foundation
import PushRelayProtocol
import Synchronization

/// Fans the results of a tenant's jobs out to that tenant's result-stream subscribers.
package final class ResultBroadcaster: Sendable {
    /// One subscriber: where its events go and whether it wants receipts.
    struct Subscriber: Sendable {
        var tenant: String
        var receipts: Bool
        var deliver: @Sendable (Pushrelay_V1_ResultEvent) -> Void
    }

    private let subscribers = Mutex<[UUID: Subscriber]>([:])

    /// An empty broadcaster.
    package init() {}

    /// Adds a subscriber for `tenant`'s events; returns the id that removes it.
    func subscribe(
        tenant: String,
        receipts: Bool,
        deliver: @escaping @Sendable (Pushrelay_V1_ResultEvent) -> Void
    ) -> UUID {
        let id = UUID()
        subscribers.withLock { $0[id] = Subscriber(tenant: tenant, receipts: receipts, deliver: deliver) }
        return id
    }

    /// Removes a subscriber.
    func unsubscribe(_ id: UUID) {
        _ = subscribers.withLock { $0.removeValue(forKey: id) }
    }

    /// Sends `event` to `tenant`'s subscribers (receipts only to those who asked for them).
    /// Whether a connection of `tenant` follows its results (and receipts, when `receipts`): events nobody
    /// reads need not be built.
    func hasSubscribers(tenant: String, receipts: Bool) -> Bool {
        subscribers.withLock { all in all.values.contains { $0.tenant == tenant && (!receipts || $0.receipts) } }
    }

    func publish(_ event: Pushrelay_V1_ResultEvent, tenant: String) {
        let isReceipt = if case .receipt = event.event { true } else { false }
        let targets = subscribers.withLock { all in
            all.values.filter { $0.tenant == tenant && (!isReceipt || $0.receipts) }
        }
        for target in targets { target.deliver(event) }
    }
}
