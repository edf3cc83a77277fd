import PushRelayProtocol
import RelayServer
import Testing

@Suite struct RelayServerConfigurationTests {
    @Test func defaultsAreTheDocumentedLimits() {
        let configuration = RelayServerConfiguration()
        #expect(configuration.limits.maxFrameBytes == 1_048_576)
        #expect(configuration.limits.maxDecompressedBytes == 4_194_304)
        #expect(configuration.limits.maxInFlight == 128)
        #expect(configuration.limits.maxRecipients == 10_000)
        #expect(configuration.helloTimeout == .seconds(10))
    }
}
