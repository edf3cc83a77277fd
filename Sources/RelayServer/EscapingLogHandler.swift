public import Logging
import PushRelayProtocol

/// A log handler that escapes control characters in every message and metadata value before another
/// handler writes them, so that nothing a client sends (a newline, an ANSI escape, a bidirectional override)
/// can start a line of its own, repaint a terminal or disguise a line: `a\nb` is logged as `a\u{A}b`.
///
/// Values stay fields: the wrapped handler prints them as it always does, only their control characters
/// are spelled out.
public struct EscapingLogHandler: LogHandler {
    private var wrapped: any LogHandler

    /// Escapes what `wrapped` writes.
    public init(wrapping wrapped: any LogHandler) {
        self.wrapped = wrapped
    }

    /// The wrapped handler's level.
    public var logLevel: Logger.Level {
        get { wrapped.logLevel }
        set { wrapped.logLevel = newValue }
    }

    /// The wrapped handler's metadata, escaped as it is set.
    public var metadata: Logger.Metadata {
        get { wrapped.metadata }
        set { wrapped.metadata = newValue.mapValues(Self.escape) }
    }

    /// One metadata value of the wrapped handler, escaped as it is set.
    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { wrapped[metadataKey: key] }
        set { wrapped[metadataKey: key] = newValue.map(Self.escape) }
    }

    /// Writes the event with its message and metadata escaped.
    public func log(event: LogEvent) {
        var event = event
        event.message = "\(Self.escape(event.message.description))"
        event.metadata = event.metadata?.mapValues(Self.escape)
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

    private static func escape(_ value: Logger.Metadata.Value) -> Logger.Metadata.Value {
        switch value {
        case .string(let text): .string(escape(text))
        case .stringConvertible(let convertible): .string(escape(convertible.description))
        case .array(let values): .array(values.map(escape))
        case .dictionary(let values): .dictionary(values.mapValues(escape))
        }
    }
}
