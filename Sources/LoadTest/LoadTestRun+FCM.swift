import FCM
import Foundation
import PushRelayProtocol
import RelayStore

/// The FCM side of a run: the FCM simulator as a child process (`pushrelay fcm-sim`), and the service account it
/// writes for the FCM tenant's Firebase project, stored sealed in the store as an operator's
/// `pushrelay admin key add --fcm-service-account` would.
extension LoadTestRun {
    /// The running FCM simulator: where it listens, and the CA the relay trusts for it and its token endpoint.
    struct FCMSimulator {
        /// The `pushrelay fcm-sim` child.
        let process: ChildProcess
        /// Its port on 127.0.0.1 (`messages:send` and the token endpoint).
        let port: Int
        /// Its CA certificate.
        let caFile: String
    }

    /// Starts `pushrelay fcm-sim` with its own certificate folder in the work folder, 100 streams a connection as
    /// Google announces, the run's FCM latency, a quota no fan-out reaches, and a new service account of `tenant`'s
    /// project; then stores that account for `tenant`, sealed with `masterKey`.
    func startFCMSimulator(for tenant: RunTenant, masterKey: MasterKey) async throws -> FCMSimulator {
        guard let project = tenant.configuration.fcm?.projectID else {
            throw LoadTestError("tenant \(tenant.id) names no Firebase project")
        }
        let folder = options.workDirectory + "/fcm-sim"
        let accountFile = options.workDirectory + "/keys/\(tenant.id)-service-account.json"
        let arguments = [
            "fcm-sim", "--host", "127.0.0.1", "--port", "0", "--cert-dir", folder, "--new-account",
            "\(project):\(accountFile)", "--max-streams", "\(FCMPoolConfiguration.streamsPerConnection)",
            "--messages-per-minute", "\(Self.unlimitedMessagesPerMinute)",
            "--latency-ms", "\(options.fcmLatencyMilliseconds)",
            "--latency-jitter-ms", "\(options.fcmLatencyJitterMilliseconds)",
        ]
        let process = try ChildProcess(
            name: "fcm-sim", executable: options.executable, arguments: arguments,
            logFile: options.workDirectory + "/fcm-sim.log"
        )
        let port = try await process.waitFor("its port") { () -> Int? in
            // The address of the line `FCM simulator listening on https://HOST:PORT`, printed once the accounts'
            // files are written.
            let output = process.output()
            guard let range = output.range(of: #"(?<=listening on https://)\S+(?=\n)"#, options: .regularExpression)
            else { return nil }
            return try? HostAndPort(parsing: String(output[range])).port
        }
        try await storeServiceAccount(accountFile, tenant: tenant.id, masterKey: masterKey)
        progress.finish("FCM simulator: pid \(process.pid), 127.0.0.1:\(port); service account of \(project) stored")
        return FCMSimulator(process: process, port: port, caFile: folder + "/ca.pem")
    }

    /// Messages a minute the FCM simulator and the relay's FCM pools allow a project during the run: FCM's
    /// default quota (600,000) would pace a 1,000,000 fan-out, which measures the relay, not the quota.
    static let unlimitedMessagesPerMinute = 1_000_000_000

    /// Stores the service account in `file` for `tenant` as `admin key add --fcm-service-account` does: key id its
    /// `private_key_id`, team id its `project_id`, the fingerprint of its public key, the JSON sealed.
    private func storeServiceAccount(_ file: String, tenant: String, masterKey: MasterKey) async throws {
        let json = try Data(contentsOf: URL(fileURLWithPath: file))
        let account = try FCMServiceAccount(json: json)
        // The public key's PEM is base64 of its DER (SubjectPublicKeyInfo) between the BEGIN and END lines.
        let base64 = account.publicKeyPEM.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        let credential = CheckedCredential(
            kind: .fcmServiceAccount, keyID: account.privateKeyID, teamID: account.projectID,
            fingerprint: RelayStore.fingerprint(publicKeyDER: Data(base64Encoded: base64) ?? Data()), material: json)
        _ = try await store.addSigningKey(tenant: tenant, credential: credential, masterKey: masterKey)
    }
}
