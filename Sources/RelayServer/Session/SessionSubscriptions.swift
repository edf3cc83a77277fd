import Foundation
import PushRelayProtocol

/// A session's results-stream subscriptions, and the events kept for them while the peer does not read: at most
/// ``ConnectionBounds/maximumSubscriptions`` subscriptions and ``ConnectionBounds/maximumQueuedEvents`` events,
/// the oldest dropped beyond it.
struct SessionSubscriptions {
    /// Each subscription's id in the ``ResultBroadcaster``, by the request id of its SUBSCRIBE_RESULTS.
    private var subscriptions: [UInt32: UUID] = [:]
    /// Events that came while the channel was not writable, oldest first, with their subscription's request id.
    private var queued: [(UInt32, Pushrelay_V1_ResultEvent)] = []
    /// Events dropped from a full queue since the last time the queue was written.
    private var dropped = 0

    /// No subscription.
    init() {}

    /// How many subscriptions the session holds.
    var count: Int { subscriptions.count }

    /// Events waiting for the channel to take writes.
    var queuedCount: Int { queued.count }

    /// Whether the SUBSCRIBE_RESULTS of `requestID` holds a subscription.
    func contains(_ requestID: UInt32) -> Bool { subscriptions[requestID] != nil }

    /// The SUBSCRIBE_RESULTS of `requestID` holds `subscription` from now on.
    mutating func add(_ subscription: UUID, for requestID: UInt32) {
        subscriptions[requestID] = subscription
    }

    /// Ends the subscription of the SUBSCRIBE_RESULTS of `requestID`; its id, `nil` when there is none.
    mutating func remove(_ requestID: UInt32) -> UUID? {
        subscriptions.removeValue(forKey: requestID)
    }

    /// Ends every subscription and forgets the queued events; the ids of the subscriptions.
    mutating func removeAll() -> [UUID] {
        let ids = Array(subscriptions.values)
        subscriptions = [:]
        queued = []
        return ids
    }

    /// An event for the subscription of `requestID`: the frame to write now when the channel is `writable` and no
    /// event waits before it; else `nil`, the event kept (the oldest dropped beyond
    /// ``ConnectionBounds/maximumQueuedEvents``) or, for a subscription that ended, dropped.
    mutating func deliver(_ event: Pushrelay_V1_ResultEvent, requestID: UInt32, writable: Bool) -> SessionOutput? {
        guard subscriptions[requestID] != nil else { return nil }
        if writable, queued.isEmpty {
            return .resultEvent(requestID: requestID, event)
        }
        if queued.count >= ConnectionBounds.maximumQueuedEvents {
            queued.removeFirst()
            dropped += 1
        }
        queued.append((requestID, event))
        return nil
    }

    /// The channel takes writes again: the queued events of the subscriptions still held, oldest first, and how
    /// many were dropped while they waited.
    mutating func takeQueued() -> (events: [SessionOutput], dropped: Int) {
        guard !queued.isEmpty else { return ([], 0) }
        let events = queued.compactMap { requestID, event in
            subscriptions[requestID] == nil ? nil : SessionOutput.resultEvent(requestID: requestID, event)
        }
        queued = []
        defer { dropped = 0 }
        return (events, dropped)
    }
}
