/// What became of one message an ``FCMPool`` was given: FCM's answer, read by Google's error table, or why it was
/// not sent, and how many times it went to FCM.
public struct FCMDeliveryReport: Sendable, Hashable {
    /// What happened to the message.
    public enum Outcome: Sendable, Hashable {
        /// FCM answered (after the engine's retries of 429 and 5xx within the deadline, and one resend with a new
        /// access token after a 401).
        case answered(FCMAnswer)
        /// It was not sent, or no answer came: no access token (`isConfiguration` when the token endpoint refused
        /// the account, which only an operator fixes), FCM unreachable, the pool full or shut down.
        case notSent(reason: String, isConfiguration: Bool)
        /// The engine refused the request before sending it (its body too large): the same message fails again.
        case invalid(String)
    }

    /// What happened to the message.
    public var outcome: Outcome
    /// Requests sent to FCM for the message, resends included; 0 when none left the pool.
    public var attempts: Int

    /// A report of `outcome` after `attempts` requests.
    public init(outcome: Outcome, attempts: Int) {
        self.outcome = outcome
        self.attempts = attempts
    }
}
