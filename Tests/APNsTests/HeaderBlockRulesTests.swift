import NIOHPACK
import Testing

@testable import APNsSimulator

/// The simulator's own checks of received header blocks (RFC 9113 8.2, 8.3), which stand in for NIOHTTP2's.
@Suite("HTTP/2 header block rules")
struct HeaderBlockRulesTests {
    static let request: [(String, String)] = [
        (":method", "POST"), (":scheme", "https"), (":path", "/3/device/abcd"), (":authority", "localhost"),
        ("authorization", "bearer x.y.z"), ("apns-topic", "com.example.app"), ("te", "trailers"),
    ]

    @Test func aWellFormedRequestPasses() {
        #expect(HeaderBlockRules.requestViolation(HPACKHeaders(Self.request)) == nil)
        // CONNECT has :method and :authority only.
        let connect = HPACKHeaders([(":method", "CONNECT"), (":authority", "localhost:443")])
        #expect(HeaderBlockRules.requestViolation(connect) == nil)
        #expect(HeaderBlockRules.trailersViolation(HPACKHeaders([("x-checksum", "abc")])) == nil)
    }

    @Test(
        arguments: [
            ([(":path", "/3/device/abcd")], "duplicate pseudo-header field :path"),
            ([(":status", "200")], "unknown pseudo-header field :status"),
            ([("Apns-Id", "x")], "invalid field name"),
            ([("apns id", "x")], "invalid field name"),
            ([("", "x")], "invalid field name"),
            ([("connection", "close")], "connection-specific field connection"),
            ([("transfer-encoding", "chunked")], "connection-specific field transfer-encoding"),
            ([("upgrade", "h2c")], "connection-specific field upgrade"),
            ([("te", "gzip")], "te other than trailers"),
            ([("apns-topic", "a\rb")], "NUL, CR or LF in the value of apns-topic"),
            ([("apns-topic", "a\u{0}")], "NUL, CR or LF in the value of apns-topic"),
        ]
    )
    func aBrokenFieldMakesTheRequestMalformed(extra: [(String, String)], violation: String) {
        // A pseudo-header field goes with the others, first; a regular one last.
        let block = extra.allSatisfy { $0.0.hasPrefix(":") } ? extra + Self.request : Self.request + extra
        #expect(HeaderBlockRules.requestViolation(HPACKHeaders(block)) == violation)
    }

    @Test func pseudoHeaderFieldsComeFirstAreValidAndComplete() {
        let late = [(":authority", "localhost")] + Self.request.filter { $0.0 != ":authority" }.reversed()
        #expect(HeaderBlockRules.requestViolation(HPACKHeaders(late)) != nil)
        let withoutScheme = Self.request.filter { $0.0 != ":scheme" }
        #expect(
            HeaderBlockRules.requestViolation(HPACKHeaders(withoutScheme))
                == "missing or disallowed pseudo-header fields")
        let emptyPath = Self.request.map { $0.0 == ":path" ? ($0.0, "") : $0 }
        #expect(HeaderBlockRules.requestViolation(HPACKHeaders(emptyPath)) == "empty :path")
        let spaceInPath = Self.request.map { $0.0 == ":path" ? ($0.0, "/3/device/a b") : $0 }
        #expect(HeaderBlockRules.requestViolation(HPACKHeaders(spaceInPath)) == "invalid value of :path")
        let connectWithPath = HPACKHeaders([(":method", "CONNECT"), (":authority", "h:1"), (":path", "/")])
        #expect(HeaderBlockRules.requestViolation(connectWithPath) == "missing or disallowed pseudo-header fields")
    }

    @Test func trailersHaveNoPseudoHeaderFields() {
        #expect(
            HeaderBlockRules.trailersViolation(HPACKHeaders([(":path", "/")]))
                == "pseudo-header field :path in trailers")
        #expect(HeaderBlockRules.trailersViolation(HPACKHeaders([("Bad", "x")])) == "invalid field name")
    }
}
