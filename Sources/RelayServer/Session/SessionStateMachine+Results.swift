import Foundation
import NIOCore
import PushRelayProtocol
import RelayStore

extension SessionStateMachine {

    /// SUBSCRIBE_RESULTS `frame` of `tenant`: `.subscribe`, within ``ConnectionBounds/maximumSubscriptions``.
    mutating func subscribe(_ frame: Frame, tenant: String) -> [SessionAction] {
        let request: Pushrelay_V1_SubscribeResults
        do throws(ProtocolError) {
            request = try frame.decode(limits: configuration.limits)
        } catch {
            return [.write(.error(error, requestID: frame.requestID, kind: .subscribeResults))]
        }
        guard subscriptions.count < ConnectionBounds.maximumSubscriptions else {
            let error = ProtocolError.invalidArgument(
                "subscribe_results", "a connection holds at most \(ConnectionBounds.maximumSubscriptions) subscriptions"
            )
            return [.write(.error(error, requestID: frame.requestID, kind: .subscribeResults))]
        }
        return [.subscribe(requestID: frame.requestID, tenant: tenant, receipts: request.receipts)]
    }

    /// The SUBSCRIBE_RESULTS of `requestID` holds `subscription` in the results stream: it is answered. A session
    /// closed meanwhile ends the subscription at once.
    mutating func subscribed(requestID: UInt32, subscription: UUID) -> [SessionAction] {
        guard state != .closed else { return [.unsubscribe(subscription)] }
        subscriptions.add(subscription, for: requestID)
        return [.write(.subscribed(requestID: requestID))]
    }

    /// UNSUBSCRIBE_RESULTS `frame`: the subscription it names ends (`NOT_FOUND` when there is none).
    mutating func unsubscribe(_ frame: Frame) -> [SessionAction] {
        do throws(ProtocolError) {
            let request: Pushrelay_V1_UnsubscribeResults = try frame.decode(limits: configuration.limits)
            guard let subscription = subscriptions.remove(request.subscriptionRequestID) else {
                throw ProtocolError(
                    .notFound, "no subscription with request id \(request.subscriptionRequestID)",
                    field: "unsubscribe_results.subscription_request_id")
            }
            return [.unsubscribe(subscription), .write(.unsubscribed(requestID: frame.requestID))]
        } catch {
            return [.write(.error(error, requestID: frame.requestID, kind: .unsubscribeResults))]
        }
    }

    /// An event of the subscription of `requestID`: written now when the channel takes writes and no event waits
    /// before it, else kept for when it does (the oldest dropped beyond ``ConnectionBounds/maximumQueuedEvents``).
    mutating func resultEvent(_ event: Pushrelay_V1_ResultEvent, requestID: UInt32) -> [SessionAction] {
        guard state != .closed,
            let output = subscriptions.deliver(event, requestID: requestID, writable: reading.writable)
        else { return [] }
        return [.write(output)]
    }
}
