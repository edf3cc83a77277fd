/// Why a device's notification is held instead of recorded: its provider could not take it, for a while
/// (``outage``) or until the tenant's configuration is fixed (``configuration``). Anything else a send ends with
/// (delivered, a dead token, a notification the provider refuses for its own content) is recorded at once.
enum HoldCause: Hashable, Sendable {
    /// Unreachable, a lost connection, a deadline, 429 or 5xx after the engine's retries: it comes back by itself.
    case outage(reason: String)
    /// The provider refuses the tenant's key, team, certificate or topic, or the relay has no usable key for the
    /// destination: it comes back when an operator fixes it. The destination's pool is stopped meanwhile.
    case configuration(reason: String)

    /// The short cause recorded with the hold and used as metrics' `reason` label.
    var reason: String {
        switch self {
        case .outage(let reason), .configuration(let reason): reason
        }
    }

    /// What an operator does about a configuration fault of `reason` for `tenant`, in a sentence.
    static func fix(for reason: String, tenant: String) -> String {
        switch reason {
        case "InvalidProviderToken", "MissingProviderToken", "UnrelatedKeyIdInToken", "BadEnvironmentKeyIdInToken",
            "Forbidden":
            "APNs refuses the signing key: check its key id and team id against the Apple developer account "
                + "(pushrelay admin key list \(tenant)), then add the right key with pushrelay admin key rotate"
        case "BadCertificate", "BadCertificateEnvironment":
            "APNs refuses the client certificate: replace it with one for this app and environment"
        case "BadTopic", "TopicDisallowed", "MissingTopic":
            "APNs refuses the bundle id as topic: check bundle_ids in the tenant file and that the key's team owns "
                + "the app, then pushrelay admin tenant sync"
        case "no_signing_key":
            "the tenant has no signing key for this environment: pushrelay admin key add \(tenant) ..."
        case "no_service_account":
            "the tenant has no FCM service account: pushrelay admin key add \(tenant) --fcm-service-account FILE.json"
        case "token_refused", "UNAUTHENTICATED":
            "Google refuses the FCM service account's access token: check that its key still exists in the Google "
                + "Cloud console, then add a new key file with pushrelay admin key rotate \(tenant) "
                + "--fcm-service-account FILE.json"
        case "PERMISSION_DENIED":
            "FCM refuses the service account for the project: check that it belongs to the tenant file's "
                + "fcm.project_id and may send messages (the Firebase Admin SDK role)"
        case "invalid_service_account":
            "the stored FCM service account is unusable: add a new key file with pushrelay admin key rotate"
        case "no_master_key":
            "the relay has no master key: give it master_key_file or PUSHRELAY_MASTER_KEY"
        case "master_key_mismatch":
            "the relay's master key does not open the stored keys: give it the master key that sealed them"
        default:
            "check the tenant's signing keys and tenant file"
        }
    }
}
