import Foundation

extension UUID {
    /// A version 7 UUID (RFC 9562 §5.7): the Unix time of `date` in milliseconds in the first 48 bits, then the
    /// version, 74 random bits and the variant. Ids made in a later millisecond sort after earlier ones, as
    /// PostgreSQL `uuid` values and as lower-case text, so the rows of a new job go in at the right-hand end of
    /// the indexes on job ids (`jobs`, `job_pages`, `deliveries`) instead of at a random place in them.
    static func timeOrdered(at date: Date = Date()) -> UUID {
        var random = SystemRandomNumberGenerator()
        let milliseconds = UInt64(max(0, (date.timeIntervalSince1970 * 1000).rounded(.down)))
        let high = random.next() as UInt64
        let low = random.next() as UInt64
        func byte(_ value: UInt64, _ shift: UInt64) -> UInt8 { UInt8(truncatingIfNeeded: value >> shift) }
        return UUID(
            uuid: (
                byte(milliseconds, 40), byte(milliseconds, 32), byte(milliseconds, 24), byte(milliseconds, 16),
                byte(milliseconds, 8), byte(milliseconds, 0),
                0x70 | (byte(high, 8) & 0x0F), byte(high, 0),
                0x80 | (byte(low, 56) & 0x3F), byte(low, 48), byte(low, 40), byte(low, 32), byte(low, 24),
                byte(low, 16), byte(low, 8), byte(low, 0)
            ))
    }
}
