import Crypto
package import Foundation

/// The 256-bit key that seals every tenant's APNs signing key (AES-256-GCM) in the database.
///
/// It never lives in the database: operators keep it in a file (`--master-key-file`) or in the
/// `PUSHRELAY_MASTER_KEY` environment variable (base64 of 32 bytes). `pushrelay admin master-key generate`
/// prints a fresh one. Losing it makes every stored signing key unreadable; keys must then be added again.
package struct MasterKey: Sendable, CustomStringConvertible {
    /// The environment variable read when no master key file is given.
    package static let environmentVariable = "PUSHRELAY_MASTER_KEY"

    /// The key's 32 bytes; `SymmetricKey` is kept out of the stored properties so the type stays `Sendable`.
    private let bytes: Data

    /// A master key from exactly 32 bytes.
    package init(bytes: some DataProtocol) throws(RelayStoreError) {
        guard bytes.count == 32 else {
            throw .invalidMasterKey(reason: "it has \(bytes.count) bytes")
        }
        self.bytes = Data(bytes)
    }

    /// A master key from text: base64 (standard or URL alphabet) or hex of 32 bytes; whitespace around it is ignored.
    package init(text: String) throws(RelayStoreError) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.isEmpty { throw .invalidMasterKey(reason: "it is empty") }
        if trimmed.utf8.count == 64, let decoded = Self.hex(trimmed) {
            try self.init(bytes: decoded)
            return
        }
        var base64 = trimmed.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.utf8.count % 4 != 0 { base64 += "=" }
        guard let decoded = Data(base64Encoded: base64) else {
            throw .invalidMasterKey(reason: "it is neither base64 nor hex text")
        }
        try self.init(bytes: decoded)
    }

    /// A master key read from a file holding the raw 32 bytes, or their base64 or hex text.
    package init(file path: String) throws(RelayStoreError) {
        let contents: Data
        do {
            contents = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw .invalidMasterKey(reason: "cannot read \(path): \((error as NSError).localizedDescription)")
        }
        if contents.count == 32 {
            try self.init(bytes: contents)
        } else {
            try self.init(text: String(decoding: contents, as: UTF8.self))
        }
    }

    /// The master key from `file` when given, else from ``environmentVariable`` in `environment`;
    /// ``RelayStoreError/missingMasterKey`` when neither is there.
    package static func load(
        file: String?,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(RelayStoreError) -> MasterKey {
        if let file { return try MasterKey(file: file) }
        guard let text = environment[environmentVariable], !text.isEmpty else { throw .missingMasterKey }
        return try MasterKey(text: text)
    }

    /// A fresh random master key.
    package static func generate() -> MasterKey {
        // 32 random bytes always make a valid key.
        try! MasterKey(bytes: SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) })
    }

    /// Never the key: `MasterKey(redacted)`, so logging or printing one leaks nothing.
    package var description: String { "MasterKey(redacted)" }

    /// The key as standard base64, the form `PUSHRELAY_MASTER_KEY` and key files take.
    package var base64: String { bytes.base64EncodedString() }

    /// Seals `plaintext` with AES-256-GCM, authenticating `context` as additional data.
    /// The result is nonce (12 bytes) ‖ ciphertext ‖ tag (16 bytes).
    func seal(_ plaintext: Data, context: Data) -> Data {
        // AES-GCM sealing with a 256-bit key and a random nonce cannot fail.
        let box = try! AES.GCM.seal(plaintext, using: SymmetricKey(data: bytes), authenticating: context)
        return box.combined!
    }

    /// Opens what ``seal(_:context:)`` made with the same key and context; `nil` when the key or context differs
    /// or the bytes were altered.
    func open(_ sealed: Data, context: Data) -> Data? {
        guard let box = try? AES.GCM.SealedBox(combined: sealed) else { return nil }
        return try? AES.GCM.open(box, using: SymmetricKey(data: bytes), authenticating: context)
    }

    private static func hex(_ text: String) -> Data? {
        var data = Data()
        var high: UInt8?
        for byte in text.utf8 {
            let value: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): value = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): value = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            if let h = high {
                data.append(h << 4 | value)
                high = nil
            } else {
                high = value
            }
        }
        return high == nil ? data : nil
    }
}

/// Compares two byte strings in time that depends only on their lengths: every byte is looked at, no early exit.
func constantTimeEquals(_ a: some DataProtocol, _ b: some DataProtocol) -> Bool {
    let left = Array(a)
    let right = Array(b)
    var difference: UInt8 = left.count == right.count ? 0 : 1
    let count = max(left.count, right.count)
    for index in 0..<count {
        let x = index < left.count ? left[index] : 0
        let y = index < right.count ? right[index] : 0
        difference |= x ^ y
    }
    return difference == 0
}

/// Lower-case hex of `bytes`.
func hexString(_ bytes: some Sequence<UInt8>) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    for byte in bytes {
        out.append(digits[Int(byte >> 4)])
        out.append(digits[Int(byte & 0x0F)])
    }
    return String(decoding: out, as: UTF8.self)
}
