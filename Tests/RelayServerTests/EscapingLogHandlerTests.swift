import Logging
import NIOCore
import PushRelayProtocol
import RelayServer
import Synchronization
import Testing

/// Nothing a client sends can shape a log line: control characters in messages and metadata are spelled out, and
/// each metadata value is one logfmt field, quoted when it could start another.
@Suite struct EscapingLogHandlerTests {
    @Test func controlCharactersInMessagesAndMetadataAreSpelledOut() {
        let lines = CapturedLines()
        var logger = Logger(label: "pushrelay") { _ in EscapingLogHandler(wrapping: CapturingLogHandler(lines: lines)) }
        logger[metadataKey: "client"] = "evil\n2026-01-01T00:00:00 critical : forged"
        logger.info(
            "authenticated \u{1B}[31mred",
            metadata: ["tenant": "circl\r\nx", "list": .array(["a\u{7}"]), "plain": "ok"])
        let entry = try! #require(lines.entries.first)
        #expect(entry.message == "authenticated \\u{1B}[31mred")
        // Its spaces quote it: the backslash of \u{A} is escaped within the quotes.
        #expect(entry.metadata["client"] == #""evil\\u{A}2026-01-01T00:00:00 critical : forged""#)
        #expect(entry.metadata["tenant"] == "circl\\u{D}\\u{A}x")
        #expect(entry.metadata["list"]?.contains("\u{7}") == false)
        #expect(entry.metadata["list"]?.contains("u{7}") == true)
        #expect(entry.metadata["plain"] == "ok")
        for line in lines.all {
            #expect(!line.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) })
        }
    }

    @Test func aValueThatCouldStartAFieldIsQuoted() {
        #expect(EscapingLogHandler.field("circl request=c0/0 forged=X") == #""circl request=c0/0 forged=X""#)
        #expect(EscapingLogHandler.field("a=b") == #""a=b""#)
        #expect(EscapingLogHandler.field(#"say "hi" \ bye"#) == #""say \"hi\" \\ bye""#)
        #expect(EscapingLogHandler.field(#"a"b"#) == #""a\"b""#)
        #expect(EscapingLogHandler.field("") == #""""#)
        #expect(EscapingLogHandler.field("no\u{A0}break") == "\"no\u{A0}break\"")
        #expect(EscapingLogHandler.field("ideographic\u{3000}space") == "\"ideographic\u{3000}space\"")
        for plain in ["c12/7", "circl", "0195b4ba-8d3a-7f13-8b0c-5a8f9b0e2c11", #"back\slash"#, "caf\u{E9}"] {
            #expect(EscapingLogHandler.field(plain) == plain)
        }
    }

    @Test func aForgedFieldInAValueStaysInItsField() {
        let stream = CapturedStream()
        var logger = Logger(label: "pushrelay") { label in
            EscapingLogHandler(wrapping: StreamLogHandler(label: label, stream: stream, metadataProvider: nil))
        }
        logger[metadataKey: "tenant"] = "circl request=c0/0 forged=X"
        logger.info("authenticated", metadata: ["client": #"a "quoted" \ name"#, "empty": ""])
        let line = try! #require(stream.lines.first)
        let fields = logfmtFields(line)
        #expect(fields["tenant"] == "circl request=c0/0 forged=X", "\(line)")
        #expect(fields["client"] == #"a "quoted" \ name"#, "\(line)")
        #expect(fields["empty"] == "", "\(line)")
        #expect(fields["forged"] == nil, "\(line)")
        #expect(fields["request"] == nil, "\(line)")
        #expect(line.contains(#"tenant="circl request=c0/0 forged=X""#), "\(line)")
    }

    @Test func metadataReadsBackAsSetAndIsQuotedOnceWhateverTheLinesWritten() {
        let lines = CapturedLines()
        var logger = Logger(label: "pushrelay") { _ in EscapingLogHandler(wrapping: CapturingLogHandler(lines: lines)) }
        logger[metadataKey: "tenant"] = "a b"
        #expect(logger[metadataKey: "tenant"] == "a b")
        logger.info("one")
        logger[metadataKey: "connection"] = "c12"
        logger.info("two")
        #expect(lines.entries.map { $0.metadata["tenant"] } == [#""a b""#, #""a b""#])
        #expect(lines.entries.last?.metadata["connection"] == "c12")
    }

    @Test func theWrappedHandlersMetadataItsProviderAndTheLinesErrorAreRenderedToo() {
        let stream = CapturedStream()
        let provider = Logger.MetadataProvider { ["trace": "x forged=1"] }
        var stored = StreamLogHandler(label: "pushrelay", stream: stream, metadataProvider: provider)
        stored.metadata = ["node": "n forged=2"]
        let logger = Logger(label: "pushrelay") { _ in EscapingLogHandler(wrapping: stored) }
        logger.error("request failed", error: ForgedError(), metadata: ["explicit": "e forged=4"])
        let line = try! #require(stream.lines.first)
        let fields = logfmtFields(line)
        #expect(fields["trace"] == "x forged=1", "\(line)")
        #expect(fields["node"] == "n forged=2", "\(line)")
        #expect(fields["explicit"] == "e forged=4", "\(line)")
        #expect(fields["error.message"] == "bad forged=3", "\(line)")
        #expect(fields["forged"] == nil, "\(line)")
    }
}

extension RelayServerSuites {
    /// A HELLO's tenant and client name reach the relay's log as one field each, whatever they hold.
    @Suite struct LogForgingTests {
        @Test func helloCannotWriteAFieldOfItsOwn() async throws {
            let stream = CapturedStream()
            var logger = Logger(label: "pushrelay") { label in
                EscapingLogHandler(wrapping: StreamLogHandler(label: label, stream: stream, metadataProvider: nil))
            }
            logger.logLevel = .debug
            let forgedTenant = "circl request=c0/0 forged=X"
            let forgedClient = "django forged=Y tenant=argus"
            try await RelayHarness.with(logger: logger) { relay in
                // No valid credential is needed: a failed HELLO logs the tenant it claims.
                let intruder = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                let refused = try #require(
                    await intruder.hello(tenant: forgedTenant, credential: "prk_" + String(repeating: "W", count: 43)))
                #expect(try refused.decode(Pushrelay_V1_Error.self).code == .authenticationFailed)
                await intruder.close()
                let backend = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                var hello = Pushrelay_V1_Hello()
                hello.minVersion = 1
                hello.maxVersion = 1
                hello.tenant = "circl"
                hello.credential = relay.credentials["circl"]!
                hello.clientName = forgedClient
                try await backend.send(kind: .hello, requestID: 1, message: hello)
                #expect(await backend.next()?.kind == FrameKind.hello.answer)
                #expect(try await backend.pingWorks())
                await backend.close()
            }
            let lines = stream.lines
            let fields = lines.map(logfmtFields)
            #expect(fields.contains { $0["tenant"] == forgedTenant }, "the failed HELLO's tenant is logged")
            #expect(fields.contains { $0["client"] == forgedClient }, "the client name is logged")
            #expect(lines.count > 5, "the relay logs at debug level")
            for (line, parsed) in zip(lines, fields) {
                #expect(parsed["forged"] == nil, "\(line)")
                #expect(parsed["request"] != "c0/0", "\(line)")
            }
        }
    }
}

private struct ForgedError: Error, CustomStringConvertible {
    var description: String { "bad forged=3" }
}

/// Lines written by a `StreamLogHandler`.
final class CapturedStream: TextOutputStream, Sendable {
    private let text = Mutex("")

    func write(_ string: String) {
        text.withLock { $0 += string }
    }

    /// The lines written so far.
    var lines: [String] {
        text.withLock { $0 }.split(separator: "\n").map(String.init)
    }
}

/// The `key=value` fields of a line as a logfmt reader sees them: words are split at spaces outside double quotes, a
/// quoted value loses its quotes and its backslash escapes, and a word without `=` is no field.
func logfmtFields(_ line: String) -> [String: String] {
    var fields: [String: String] = [:]
    var rest = Substring(line)
    while !rest.isEmpty {
        rest = rest.drop { $0 == " " }
        var key = ""
        while let next = rest.first, next != " ", next != "=" {
            key.append(next)
            rest = rest.dropFirst()
        }
        guard rest.first == "=" else { continue }
        rest = rest.dropFirst()
        var value = ""
        if rest.first == "\"" {
            rest = rest.dropFirst()
            while let next = rest.first, next != "\"" {
                rest = rest.dropFirst()
                if next == "\\", let escaped = rest.first {
                    value.append(escaped)
                    rest = rest.dropFirst()
                } else {
                    value.append(next)
                }
            }
            rest = rest.dropFirst()
        } else {
            while let next = rest.first, next != " " {
                value.append(next)
                rest = rest.dropFirst()
            }
        }
        fields[key] = value
    }
    return fields
}
