import Logging
import RelayServer
import Testing

/// Nothing a client sends can shape a log line: control characters in messages and metadata are spelled out,
/// and values stay fields.
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
        #expect(entry.metadata["client"] == "evil\\u{A}2026-01-01T00:00:00 critical : forged")
        #expect(entry.metadata["tenant"] == "circl\\u{D}\\u{A}x")
        #expect(entry.metadata["list"]?.contains("\u{7}") == false)
        #expect(entry.metadata["list"]?.contains("u{7}") == true)
        #expect(entry.metadata["plain"] == "ok")
        for line in lines.all {
            #expect(!line.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) })
        }
    }
}
