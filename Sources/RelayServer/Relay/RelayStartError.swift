/// Why ``Relay/start(configuration:store:group:logger:)`` could not start the relay, said for an operator.
package struct RelayStartError: Error, CustomStringConvertible, Equatable {
    /// A one-sentence explanation naming the setting to change.
    package let description: String

    /// The operator port (`metrics_listen`) at `address` could not be opened; `reason` is the system's.
    package static func operatorPortUnavailable(address: String, reason: String) -> Self {
        Self(
            description: "metrics_listen \(address) cannot be opened: \(reason) (another relay on this host? set "
                + "another address with metrics_listen, --metrics-listen or PUSHRELAY_METRICS_LISTEN, or \"\" to turn "
                + "the operator port off)")
    }
}
