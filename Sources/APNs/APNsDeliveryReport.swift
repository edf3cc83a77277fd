/// What became of one notification, after every attempt the pool made.
public struct APNsDeliveryReport: Sendable, Hashable {
    /// The outcome class of the last attempt.
    public var outcome: APNsOutcomeClass
    /// APNs's last answer, when there was one.
    public var response: APNsResponse?
    /// Why there was no answer, when there was none.
    public var failure: APNsTransportFailure?
    /// How many times the request was sent to APNs (a stream opened for it), resends after a lost connection or a
    /// refused stream included; 0 when it never left the queue.
    public var attempts: Int

    /// A report with these fields.
    public init(
        outcome: APNsOutcomeClass, response: APNsResponse? = nil, failure: APNsTransportFailure? = nil,
        attempts: Int
    ) {
        self.outcome = outcome
        self.response = response
        self.failure = failure
        self.attempts = attempts
    }

    /// The reason to show: APNs's reason, or the transport failure.
    public var reasonText: String {
        if let reason = response?.reason { return reason.rawValue }
        if let failure { return "\(failure)" }
        return response.map { "HTTP \($0.status)" } ?? "unknown"
    }
}
