/// A small, seedable random number generator (SplitMix64), so that random faults can be repeated.
package struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    /// A generator whose sequence is fixed by `seed`.
    package init(seed: UInt64) {
        self.state = seed
    }

    /// The next 64 random bits.
    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension SplitMix64 {
    /// A random (version 4) UUID in the upper-case canonical form APNs uses for `apns-id`.
    ///
    /// Foundation's `UUID().uuidString` reads system randomness and formats with `sprintf` on every call,
    /// which shows up in a load test's profile; this does neither.
    mutating func nextUUIDString() -> String {
        let high = (next() & ~0xF000) | 0x4000  // version 4
        let low = (next() & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000  // RFC 4122 variant
        return String(unsafeUninitializedCapacity: 36) { buffer in
            var position = 0
            for nibble in 0..<32 {
                if nibble == 8 || nibble == 12 || nibble == 16 || nibble == 20 {
                    buffer[position] = UInt8(ascii: "-")
                    position += 1
                }
                let word = nibble < 16 ? high : low
                let value = UInt8(truncatingIfNeeded: word >> UInt64(60 - 4 * (nibble % 16))) & 0xF
                buffer[position] = value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "A") + value - 10
                position += 1
            }
            return position
        }
    }
}
