public import Logging

/// A log handler that escapes control characters in every message and metadata value before another
/// handler writes them, so that nothing a client sends (a newline, an ANSI escape) can start a line of its
/// own or repaint a terminal: `a\nb` is logged as `a\u{0A}b`.
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

    /// `text` with each control character (U+0000–U+001F, U+007F–U+009F) written as `\u{XX}`.
    package static func escape(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var escaped = ""
        for scalar in text.unicodeScalars {
            if isControl(scalar) {
                escaped += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            } else {
                escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
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
