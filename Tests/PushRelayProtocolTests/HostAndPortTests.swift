import PushRelayProtocol
import Testing

/// `host:port` as every address of the package is read: IPv6 in brackets, the port 1 to 65535 (0 for a listener),
/// and a reason for every refusal.
@Suite struct HostAndPortTests {
    @Test func readsHostsAndPorts() throws {
        #expect(try HostAndPort(parsing: "127.0.0.1:7411") == HostAndPort(host: "127.0.0.1", port: 7411))
        #expect(try HostAndPort(parsing: "relay.example:1") == HostAndPort(host: "relay.example", port: 1))
        #expect(try HostAndPort(parsing: "localhost:65535") == HostAndPort(host: "localhost", port: 65535))
        #expect(try HostAndPort(parsing: "[::1]:2197") == HostAndPort(host: "::1", port: 2197))
        #expect(try HostAndPort(parsing: "[fe80::1%eth0]:80") == HostAndPort(host: "fe80::1%eth0", port: 80))
        #expect(try HostAndPort(parsing: "0.0.0.0:0", allowingPortZero: true) == HostAndPort(host: "0.0.0.0", port: 0))
    }

    @Test func writesWhatItReads() throws {
        for text in ["127.0.0.1:7411", "[::1]:2197", "relay.example:443"] {
            #expect(try HostAndPort(parsing: text).description == text)
        }
        #expect(HostAndPort(host: "::1", port: 7411).description == "[::1]:7411")
    }

    @Test(arguments: [
        ("nowhere", "it has no :port"),
        ("host:", "no port follows the colon"),
        (":7411", "the host is empty"),
        ("[]:7411", "the host is empty"),
        ("host:http", "the port 'http' is not a number"),
        ("host:+80", "the port '+80' is not a number"),
        ("host:-1", "the port '-1' is not a number"),
        ("host: 80", "the port ' 80' is not a number"),
        ("host:0", "the port 0 is not 1 to 65535"),
        ("host:65536", "the port 65536 is not 1 to 65535"),
        ("host:99999999999999999999999", "the port 99999999999999999999999 is not 1 to 65535"),
        ("::1:7411", "an IPv6 address goes in brackets: [::1]:7411"),
        ("[::1:7411", "the host's brackets are unbalanced"),
        ("::1]:7411", "the host's brackets are unbalanced"),
        ("[[::1]]:7411", "the host's brackets are unbalanced"),
    ])
    func refusesWhatIsNotHostAndPort(text: String, reason: String) {
        #expect(throws: HostAndPortError(text: text, reason: reason)) { try HostAndPort(parsing: text) }
    }

    @Test func portZeroIsForListeners() {
        #expect(throws: HostAndPortError(text: "127.0.0.1:0", reason: "the port 0 is not 1 to 65535")) {
            try HostAndPort(parsing: "127.0.0.1:0")
        }
        #expect(throws: HostAndPortError(text: "host:65536", reason: "the port 65536 is not 0 to 65535")) {
            try HostAndPort(parsing: "host:65536", allowingPortZero: true)
        }
        #expect(
            HostAndPortError(text: "nowhere", reason: "it has no :port").description
                == "'nowhere' is not host:port: it has no :port")
    }
}
