import APNs
import Foundation
import NIOSSL
package import PushRelayProtocol
package import RelayStore

extension ServeSettings {
    /// The relay's configuration from these settings, sending to Apple's endpoints (or ``apnsEndpoint`` with
    /// ``apnsCA``), with the operator port off: the caller opens it with the registry it bootstrapped.
    ///
    /// - Throws: ``ServeSettingsError`` for an address that is not host:port, TLS files that are incomplete or
    ///   unreadable, or pool sizes that are not 1 ≤ floor ≤ cap.
    package func relayConfiguration(masterKey: MasterKey?) throws(ServeSettingsError) -> Relay.Configuration {
        var configuration = Relay.Configuration(
            server: try serverConfiguration(), target: try appleTarget(), masterKey: masterKey)
        configuration.fcmTarget = try googleTarget()
        configuration.requestsPerSecond = requestsPerSecond
        configuration.requestBurst = requestBurst
        configuration.statementsPerTenant = dbStatementsPerTenant
        configuration.retentionDays = retentionDays
        return configuration
    }

    /// The operator port's host and port, or `nil` when ``metricsListen`` is `""`.
    package func operatorAddress() throws(ServeSettingsError) -> HostAndPort? {
        guard !metricsListen.isEmpty else { return nil }
        return try Self.address(metricsListen, of: "metrics listen", or: " or \"\"", allowingPortZero: true)
    }

    /// The master key from ``masterKeyFile`` or `PUSHRELAY_MASTER_KEY`; `nil` when neither gives one.
    package func masterKey() throws(ServeSettingsError) -> MasterKey? {
        do {
            return try MasterKey.load(file: masterKeyFile)
        } catch {
            if error.code == .missingMasterKey { return nil }
            throw ServeSettingsError(error.description)
        }
    }

    /// Apple's endpoints, or ``apnsEndpoint`` trusting ``apnsCA``.
    private func appleTarget() throws(ServeSettingsError) -> APNsTarget {
        guard connectionsPerPool >= 1 else {
            throw ServeSettingsError("connections per pool must be at least 1, not \(connectionsPerPool)")
        }
        guard maxConnectionsPerPool >= connectionsPerPool else {
            throw ServeSettingsError(
                "max connections per pool (\(maxConnectionsPerPool)) must be at least connections per pool "
                    + "(\(connectionsPerPool))")
        }
        var target = APNsTarget(
            connectionsPerPool: connectionsPerPool, maximumConnectionsPerPool: maxConnectionsPerPool)
        if let apnsEndpoint {
            let endpoint = try Self.address(apnsEndpoint, of: "apns endpoint")
            target.endpointOverride = APNsEndpoint(host: endpoint.host, port: endpoint.port)
            target.caFile = apnsCA
        }
        return target
    }

    /// Google's FCM endpoint, or ``fcmEndpoint`` trusting ``fcmCA``, with the pools' floor and cap of connections.
    private func googleTarget() throws(ServeSettingsError) -> FCMTarget {
        guard fcmMaxConnectionsPerPool >= connectionsPerPool else {
            throw ServeSettingsError(
                "fcm max connections per pool (\(fcmMaxConnectionsPerPool)) must be at least connections per pool "
                    + "(\(connectionsPerPool))")
        }
        var target = FCMTarget(
            connectionsPerPool: connectionsPerPool, maximumConnectionsPerPool: fcmMaxConnectionsPerPool,
            messagesPerMinute: fcmMessagesPerMinute)
        if let fcmEndpoint {
            let endpoint = try Self.address(fcmEndpoint, of: "fcm endpoint")
            target.endpoint = APNsEndpoint(host: endpoint.host, port: endpoint.port)
        }
        target.caFile = fcmCA
        return target
    }

    /// The listener's configuration: address, limits, timeouts and TLS.
    private func serverConfiguration() throws(ServeSettingsError) -> RelayListenerConfiguration {
        let endpoint = try Self.address(listen, of: "listen", allowingPortZero: true)
        var configuration = RelayListenerConfiguration(
            host: endpoint.host, port: endpoint.port,
            limits: ProtocolLimits(
                maxFrameBytes: maxFrameBytes, maxDecompressedBytes: maxDecompressedBytes, maxInFlight: maxInFlight,
                maxRecipients: maxRecipients
            ),
            idleTimeout: idleTimeout == 0 ? nil : .seconds(idleTimeout),
            writeStallTimeout: .seconds(max(1, writeStallTimeout)),
            maximumConnections: maxConnections, maximumConnectionsPerTenant: maxConnectionsPerTenant,
            maximumInflightBytesPerConnection: maxInflightBytesPerConnection, maximumInflightBytes: maxInflightBytes
        )
        switch (tlsCert, tlsKey) {
        case (nil, nil):
            guard tlsClientCA == nil else { throw ServeSettingsError("tls client ca needs tls cert and tls key") }
        case (let cert?, let key?):
            do {
                var tls = TLSConfiguration.makeServerConfiguration(
                    certificateChain: try NIOSSLCertificate.fromPEMFile(cert).map { .certificate($0) },
                    privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem))
                )
                if let tlsClientCA {
                    tls.certificateVerification = .noHostnameVerification
                    tls.trustRoots = .file(tlsClientCA)
                }
                configuration.tls = tls
            } catch {
                throw ServeSettingsError("tls cert or key unreadable: \(error)")
            }
        default:
            throw ServeSettingsError("give both tls cert and tls key")
        }
        return configuration
    }

    /// `text`, the setting `name`, as host and port (``HostAndPort``); `alternative` is what else the setting may
    /// be, for the message.
    private static func address(
        _ text: String, of name: String, or alternative: String = "", allowingPortZero: Bool = false
    ) throws(ServeSettingsError) -> HostAndPort {
        do {
            return try HostAndPort(parsing: text, allowingPortZero: allowingPortZero)
        } catch {
            throw ServeSettingsError("\(name) must be host:port\(alternative), not \(text): \(error.reason)")
        }
    }
}
