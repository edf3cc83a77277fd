package import APNs
import Crypto
package import RelayStore

// The store's and the tenant file's names for APNs' values, as the engine's types.

extension APNsEnvironment {
    /// The engine's environment for a tenant file's.
    package init(_ environment: TenantConfiguration.Environment) {
        switch environment {
        case .production: self = .production
        case .development: self = .development
        }
    }
}

extension APNsPushType {
    /// The engine's push type for a tenant file's `push_type`.
    package init(_ pushType: TenantConfiguration.PushType) {
        switch pushType {
        case .alert: self = .alert
        case .background: self = .background
        case .location: self = .location
        case .voip: self = .voip
        case .complication: self = .complication
        case .fileprovider: self = .fileprovider
        case .mdm: self = .mdm
        case .liveactivity: self = .liveactivity
        case .pushtotalk: self = .pushtotalk
        case .widgets: self = .widgets
        case .controls: self = .controls
        }
    }
}

extension APNsPayload.InterruptionLevel {
    /// The payload's `interruption-level` for a notification's urgency.
    init(_ level: TenantConfiguration.InterruptionLevel) {
        switch level {
        case .passive: self = .passive
        case .active: self = .active
        case .timeSensitive: self = .timeSensitive
        case .critical: self = .critical
        }
    }
}

extension DeliveryOutcome {
    /// The delivery outcome recorded for an engine outcome class.
    package init(_ outcome: APNsOutcomeClass) {
        switch outcome {
        case .delivered: self = .delivered
        case .tokenDead: self = .tokenDead
        case .retryLater: self = .retryLater
        case .configurationFault: self = .configurationFault
        }
    }
}

extension UnsealedSigningKey {
    /// The engine's key of an unsealed `.p8`: PKCS#8 DER of a P-256 key, with its record's key and team ids.
    package func apnsSigningKey() throws -> APNsSigningKey {
        try APNsSigningKey(
            privateKey: P256.Signing.PrivateKey(derRepresentation: material), keyID: record.keyID,
            teamID: record.teamID)
    }
}

extension SigningKeyEnvironment {
    /// Whether a key for this environment signs for `environment`.
    package func covers(_ environment: TenantConfiguration.Environment) -> Bool {
        switch self {
        case .both: true
        case .production: environment == .production
        case .development: environment == .development
        }
    }
}
