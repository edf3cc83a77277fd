import APNs
import PushRelayProtocol
import RelayServer
import RelayStore
import Testing

/// `serve`'s settings become the ``Relay``'s configuration: every setting lands where the relay reads it, and a
/// setting that cannot be used is refused with a message naming it, before anything starts.
@Suite struct RelayConfigurationTests {
    @Test func theDefaultSettingsGiveTheDocumentedListenerAndApplesEndpoints() throws {
        let configuration = try ServeSettings().relayConfiguration(masterKey: nil)
        #expect(configuration.server.host == "127.0.0.1")
        #expect(configuration.server.port == 7411)
        #expect(configuration.server.limits.maxFrameBytes == 1_048_576)
        #expect(configuration.server.limits.maxDecompressedBytes == 4_194_304)
        #expect(configuration.server.limits.maxInFlight == 128)
        #expect(configuration.server.limits.maxRecipients == 10_000)
        #expect(configuration.server.helloTimeout == .seconds(10))
        #expect(configuration.server.idleTimeout == .seconds(300))
        #expect(configuration.server.writeStallTimeout == .seconds(30))
        #expect(configuration.server.tls == nil)
        #expect(configuration.target.endpointOverride == nil)
        #expect(configuration.target.endpoint(for: .production) == .apple(.production))
        #expect(configuration.target.connectionsPerPool == 2)
        #expect(configuration.target.maximumConnectionsPerPool == 16)
        #expect(configuration.requestsPerSecond == 1_000)
        #expect(configuration.requestBurst == 2_000)
        #expect(configuration.retentionDays == 30)
        #expect(configuration.masterKey == nil)
        #expect(configuration.operatorPort == nil)
        #expect(try ServeSettings().operatorAddress()?.port == 9411)
    }

    @Test func everySettingLandsInTheConfiguration() throws {
        var settings = ServeSettings()
        settings.listen = "0.0.0.0:0"
        settings.maxFrameBytes = 2_048
        settings.maxDecompressedBytes = 8_192
        settings.maxInFlight = 7
        settings.maxRecipients = 9
        settings.idleTimeout = 0
        settings.writeStallTimeout = 0
        settings.apnsEndpoint = "sim.example:2197"
        settings.apnsCA = "/tmp/ca.pem"
        settings.fcmEndpoint = "fcm.example:8444"
        settings.fcmCA = "/tmp/fcm-ca.pem"
        settings.fcmMessagesPerMinute = 1_200
        settings.connectionsPerPool = 5
        settings.maxConnectionsPerPool = 6
        settings.fcmMaxConnectionsPerPool = 40
        settings.requestsPerSecond = 12.5
        settings.requestBurst = 3
        settings.retentionDays = 2
        settings.metricsListen = ""
        let configuration = try settings.relayConfiguration(masterKey: .generate())
        #expect(configuration.server.host == "0.0.0.0")
        #expect(configuration.server.port == 0)
        #expect(configuration.server.limits.maxFrameBytes == 2_048)
        #expect(configuration.server.limits.maxDecompressedBytes == 8_192)
        #expect(configuration.server.limits.maxInFlight == 7)
        #expect(configuration.server.limits.maxRecipients == 9)
        // 0 turns the idle timeout off; the write-stall timeout is at least a second.
        #expect(configuration.server.idleTimeout == nil)
        #expect(configuration.server.writeStallTimeout == .seconds(1))
        #expect(configuration.target.endpointOverride == APNsEndpoint(host: "sim.example", port: 2197))
        #expect(configuration.target.caFile == "/tmp/ca.pem")
        #expect(configuration.target.connectionsPerPool == 5)
        #expect(configuration.target.maximumConnectionsPerPool == 6)
        #expect(configuration.fcmTarget.endpoint == APNsEndpoint(host: "fcm.example", port: 8444))
        #expect(configuration.fcmTarget.caFile == "/tmp/fcm-ca.pem")
        #expect(configuration.fcmTarget.messagesPerMinute == 1_200)
        #expect(configuration.fcmTarget.connectionsPerPool == 5)
        #expect(configuration.fcmTarget.maximumConnectionsPerPool == 40)
        #expect(configuration.requestsPerSecond == 12.5)
        #expect(configuration.requestBurst == 3)
        #expect(configuration.retentionDays == 2)
        #expect(configuration.masterKey != nil)
        #expect(try settings.operatorAddress() == nil)
    }

    @Test(arguments: [
        ("listen", "nowhere", "listen must be host:port"),
        ("metrics", "9411", "metrics listen must be host:port"),
        ("apns", "sim.example", "apns endpoint must be host:port"),
        ("fcm", "fcm.example", "fcm endpoint must be host:port"),
        ("client-ca", "/tmp/ca.pem", "tls client ca needs tls cert and tls key"),
        ("cert", "/tmp/cert.pem", "give both tls cert and tls key"),
        ("unreadable", "/nonexistent/cert.pem", "tls cert or key unreadable"),
        ("floor", "0", "connections per pool must be at least 1"),
        ("cap", "1", "max connections per pool (1) must be at least connections per pool (2)"),
        ("fcm-cap", "1", "fcm max connections per pool (1) must be at least connections per pool (2)"),
    ])
    func anUnusableSettingIsRefusedNamingIt(setting: String, value: String, message: String) {
        var settings = ServeSettings()
        switch setting {
        case "listen": settings.listen = value
        case "metrics": settings.metricsListen = value
        case "apns": settings.apnsEndpoint = value
        case "fcm": settings.fcmEndpoint = value
        case "client-ca": settings.tlsClientCA = value
        case "cert": settings.tlsCert = value
        case "floor": settings.connectionsPerPool = Int(value)!
        case "cap": settings.maxConnectionsPerPool = Int(value)!
        case "fcm-cap": settings.fcmMaxConnectionsPerPool = Int(value)!
        default:
            settings.tlsCert = value
            settings.tlsKey = value
        }
        let error = #expect(throws: ServeSettingsError.self) {
            _ = try settings.relayConfiguration(masterKey: nil)
            _ = try settings.operatorAddress()
        }
        #expect(error?.description.contains(message) == true, "\(String(describing: error))")
    }
}
