import Foundation
import RelayStore

/// A provider's answer to one request, in the relay's terms: the outcome class recorded, the provider's id and
/// reason, its timestamp (when it declares a token dead), how long it asked to wait, and whether the device is to
/// be held instead of recorded.
struct ProviderReport: Sendable {
    /// ``RelayStore/DeliveryOutcome/delivered``, ``RelayStore/DeliveryOutcome/tokenDead``,
    /// ``RelayStore/DeliveryOutcome/retryLater`` or ``RelayStore/DeliveryOutcome/configurationFault``.
    var outcome: DeliveryOutcome
    /// The provider's id of the message (APNs: the `apns-id`).
    var messageID: String?
    /// The provider's reason (APNs' `Unregistered`), or why there was no answer.
    var reason: String?
    /// When the provider says the token stopped being valid (with ``RelayStore/DeliveryOutcome/tokenDead``).
    var timestamp: Date?
    /// How long the provider asked to wait before the next request (a 429's `Retry-After`).
    var retryAfter: Duration?
    /// Requests sent to the provider for the device, resends included; 0 when none left the relay.
    var attempts: Int
    /// Set when the device is held instead of recorded: the provider could not take it for a while, or until the
    /// tenant's configuration is fixed.
    var hold: HoldCause?
}
