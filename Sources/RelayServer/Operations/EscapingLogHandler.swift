package import Logging
import PushRelayProtocol

/// A log handler that makes every metadata value one field before another handler writes it, so that nothing a
/// client sends can shape a line: control characters are spelled out in messages and values (a newline, an ANSI
/// escape, a bidirectional override cannot start a line, repaint a terminal or disguise a line: `a\nb` is logged as
/// `a\u{A}b`), and a value that is empty or holds a space, `=` or `"` is quoted as logfmt quotes it (`"circl
/// request=c0/0"`, with `\"` and `\\` inside), so that no value can start a field of its own
/// (`tenant="circl forged=X"`, never `tenant=circl forged=X`).
///
/// The handler keeps the metadata as it is set (reading `connection` back gives `c12`) and renders it as each line
/// is written: its own metadata, its metadata provider's, the line's and the line's error (as `error.message` and
/// `error.type`, the names swift-log's stream handler gives them), all handed to the wrapped handler as the line's
/// metadata. The wrapped handler's own metadata and provider move to this one, so that they are rendered too.
package struct EscapingLogHandler: LogHandler {
    private var wrapped: any LogHandler

    /// The metadata of every line, as set.
    package var metadata: Logger.Metadata

    /// Metadata added to every line when it is written.
    package var metadataProvider: Logger.MetadataProvider?

    /// Renders what `wrapped` writes.
    package init(wrapping wrapped: any LogHandler) {
        var wrapped = wrapped
        metadata = wrapped.metadata
        metadataProvider = wrapped.metadataProvider
        wrapped.metadata = [:]
        // Only a handler that has a provider supports setting it (swift-log warns for the others).
        if wrapped.metadataProvider != nil { wrapped.metadataProvider = nil }
        self.wrapped = wrapped
    }

    /// The wrapped handler's level.
    package var logLevel: Logger.Level {
        get { wrapped.logLevel }
        set { wrapped.logLevel = newValue }
    }

    /// One metadata value, as set.
    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Writes the event with its message escaped and all its metadata rendered as fields.
    package func log(event: LogEvent) {
        var fields = metadata
        if let provided = metadataProvider?.get() { fields.merge(provided) { _, provided in provided } }
        if let explicit = event.metadata { fields.merge(explicit) { _, explicit in explicit } }
        if let error = event.error {
            fields["error.message"] = "\(error)"
            fields["error.type"] = "\(String(reflecting: type(of: error)))"
        }
        var event = event
        event.message = "\(Self.escape(event.message.description))"
        event.metadata = fields.mapValues { .string(Self.field(Self.escape($0).description)) }
        event.error = nil
        wrapped.log(event: event)
    }

    /// `text` with each character that can break or disguise a line (``FieldRules/isControl(_:)``) written as
    /// `\u{XX}`.
    package static func escape(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: FieldRules.isControl) else { return text }
        var escaped = ""
        for scalar in text.unicodeScalars {
            if FieldRules.isControl(scalar) {
                escaped += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            } else {
                escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    /// `text` as one logfmt value: as it is, or, when it is empty or holds a space (any white space), `=` or `"`,
    /// in double quotes with `"` and `\` escaped by a backslash.
    package static func field(_ text: String) -> String {
        let needsQuotes =
            text.isEmpty
            || text.unicodeScalars.contains { $0 == "=" || $0 == "\"" || $0.properties.isWhitespace }
        guard needsQuotes else { return text }
        var quoted = "\""
        for scalar in text.unicodeScalars {
            if scalar == "\"" || scalar == "\\" { quoted += "\\" }
            quoted.unicodeScalars.append(scalar)
        }
        return quoted + "\""
    }

    private static func escape(_ value: Logger.Metadata.Value) -> Logger.Metadata.Value {
        switch value {
        case .string(let text): .string(escape(text))
        case .stringConvertible(let convertible): .string(escape(convertible.description))
        case .array(let values): .array(values.map(escape))
        case .dictionary(let values): .dictionary(values.mapValues(escape))
        }
    }
}
