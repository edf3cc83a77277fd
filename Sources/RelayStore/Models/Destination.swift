package import PushRelayProtocol

/// Where a device's notifications go: its provider and the scope within it that a pool and a credential serve
/// (APNs: the environment; FCM: none yet, the tenant's Firebase project).
///
/// Stored by name (``storedName``) where the store keeps a destination: a held page's `wait_environment`, a
/// `provider_faults` row, and the destination column of a fan-out's device reads. An APNs destination's name is its
/// environment (`production`, `development`), as rows written before other providers existed say; any other is
/// the provider's name, then `:` and the scope when it has one.
package struct Destination: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The push service.
    package var provider: PushProvider
    /// The provider's scope (APNs: `production` or `development`); empty when the provider has none.
    package var scope: String

    /// A destination of `provider` in `scope`.
    package init(provider: PushProvider, scope: String = "") {
        self.provider = provider
        self.scope = scope
    }

    /// The APNs destination of `environment`.
    package static func apns(_ environment: TenantConfiguration.Environment) -> Destination {
        Destination(provider: .apns, scope: environment.rawValue)
    }

    /// The APNs environment of an APNs destination; `nil` for any other.
    package var apnsEnvironment: TenantConfiguration.Environment? {
        provider == .apns ? TenantConfiguration.Environment(rawValue: scope) : nil
    }

    /// The destination a stored name says (see the type's description).
    package init?(storedName: String) {
        if let environment = TenantConfiguration.Environment(rawValue: storedName) {
            self = .apns(environment)
            return
        }
        let parts = storedName.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        let provider = PushProvider(rawValue: String(parts[0]))
        guard provider.isWellFormed, provider != .apns else { return nil }
        self.init(provider: provider, scope: parts.count > 1 ? String(parts[1]) : "")
    }

    /// The name the store keeps the destination under.
    package var storedName: String {
        if provider == .apns { return scope }
        return scope.isEmpty ? provider.rawValue : "\(provider.rawValue):\(scope)"
    }

    /// The destination of a device row, from its `provider` and `environment` columns, as SQL (``init(storedName:)``
    /// reads it).
    static let deviceColumn = "CASE WHEN provider = 'apns' THEN environment ELSE provider END"

    /// Orders destinations by stored name (listings are sorted by it).
    package static func < (lhs: Destination, rhs: Destination) -> Bool { lhs.storedName < rhs.storedName }

    /// The provider and scope, `apns/production`.
    package var description: String { scope.isEmpty ? provider.rawValue : "\(provider.rawValue)/\(scope)" }
}
