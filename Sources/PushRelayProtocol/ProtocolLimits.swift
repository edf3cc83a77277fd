/// The limits a connection is held to; the relay tells them to the client in HELLO_OK.
public struct ProtocolLimits: Hashable, Sendable {
    /// The protocol version this code speaks.
    public static let currentVersion: UInt8 = 1

    /// Largest frame body accepted as sent, in bytes (1 MiB by default).
    public var maxFrameBytes: Int
    /// Largest body after zstd decompression, in bytes (4 MiB by default).
    public var maxDecompressedBytes: Int
    /// Requests one connection may have in flight before the relay stops reading (128 by default).
    public var maxInFlight: Int
    /// Most recipients (user ids plus tokens) one SEND may name (10,000 by default).
    public var maxRecipients: Int

    /// Limits with the given values; the defaults are the documented ones.
    public init(
        maxFrameBytes: Int = 1_048_576,
        maxDecompressedBytes: Int = 4_194_304,
        maxInFlight: Int = 128,
        maxRecipients: Int = 10_000
    ) {
        self.maxFrameBytes = maxFrameBytes
        self.maxDecompressedBytes = maxDecompressedBytes
        self.maxInFlight = maxInFlight
        self.maxRecipients = maxRecipients
    }
}
