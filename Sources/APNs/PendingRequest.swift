import NIOCore

/// A request as the pool tracks it across attempts: what it sends, its deadline, where its report goes, and
/// the pool's counts of its attempts. Event-loop bound: touched only on the pool's loop (the state machines
/// that hold it run there).
final class PendingRequest {
    /// Where the request's report goes: a future's promise, or the handler of a batch with the request's
    /// position in it (``APNsPool/send(_:whenFull:answers:)``).
    enum Completion: Sendable {
        case promise(EventLoopPromise<APNsDeliveryReport>)
        case answers(@Sendable (Int, Result<APNsDeliveryReport, any Error>) -> Void, position: Int)

        /// Hands over the report (or the pool's refusal); called once.
        func finish(_ result: Result<APNsDeliveryReport, any Error>) {
            switch self {
            case .promise(let promise): promise.completeWith(result)
            case .answers(let answer, let position): answer(position, result)
            }
        }
    }

    /// What a request sends: a notification to APNs' device endpoint, or a request to another HTTP/2 API.
    enum Content: Sendable {
        /// `POST /3/device/<token>` with APNs' headers.
        case notification(APNsNotification)
        /// A `POST` of its own path, headers and body.
        case request(HTTP2Request)
    }

    let content: Content
    let deadline: NIODeadline
    let completion: Completion
    /// Attempts so far, against the pool's `maximumAttempts`: each stream opened for the request counts, a resend
    /// after a refusal or a lost connection does not.
    var attempts = 0
    /// Streams opened for the request so far, resends included: what its report says was sent.
    var streamsOpened = 0
    /// Resends so far (GOAWAY, REFUSED_STREAM, a lost connection), bounded by the pool's `maximumResends`.
    var requeues = 0

    init(_ content: Content, deadline: NIODeadline, completion: Completion) {
        self.content = content
        self.deadline = deadline
        self.completion = completion
    }

    /// Hands the request's report (or the pool's refusal) to whoever waits for it; called once.
    func finish(_ result: Result<APNsDeliveryReport, any Error>) {
        completion.finish(result)
    }
}
