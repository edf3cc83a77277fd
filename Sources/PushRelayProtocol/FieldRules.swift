/// The rules a request's fields are held to before the relay acts on them (Protocol/README.md, "Field rules").
///
/// Each check throws `INVALID_ARGUMENT` (`TOO_MANY_RECIPIENTS` for a list of recipients over its count) naming the
/// field as `<request>.<field>`, or the request alone for a rule on several of its fields, so a client learns the
/// first field at fault. The rules need neither the tenant's configuration nor the database: what depends on
/// the tenant (its notification types, topics and environments) is checked where the tenant is known.
public enum FieldRules {
    /// Longest id (user id, thread id, scope, idempotency key, tenant, credential, …), in UTF-8 bytes.
    public static let maximumIDBytes = 200
    /// Longest `apns-collapse-id`, in UTF-8 bytes (APNs' limit).
    public static let maximumCollapseIDBytes = 64
    /// Latest time a `*_ms` field may name: 9999-12-31T23:59:59.999Z, the end of PostgreSQL's and
    /// Foundation's shared calendar range.
    public static let latestMilliseconds: Int64 = 253_402_300_799_999
    /// Earliest `send_at_ms`: 2000-01-01T00:00:00Z (a past time sends at once).
    public static let earliestSendAtMilliseconds: Int64 = 946_684_800_000
    /// How far ahead `send_at_ms` may be: 366 days.
    public static let scheduleHorizonMilliseconds: Int64 = 366 * 86_400_000
    /// How far ahead of UTC the first time zone to reach a wall-clock time is: 14 hours (UTC+14, the Line Islands).
    public static let firstZoneOffsetMilliseconds: Int64 = 14 * 3_600_000
    /// How far behind UTC the last time zone to reach a wall-clock time is: 12 hours (UTC−12).
    public static let lastZoneOffsetMilliseconds: Int64 = 12 * 3_600_000
    /// Latest `Send.expiration`, in Unix seconds (the same calendar end).
    public static let latestExpirationSeconds: Int64 = 253_402_300_799
    /// Longest presence, in seconds: 7 days.
    public static let maximumPresenceSeconds: UInt32 = 604_800
    /// Most rows one QUERY_DELIVERIES or LIST_DEVICES returns.
    public static let maximumQueryLimit: UInt32 = 1_000
    /// Rows one QUERY_DELIVERIES or LIST_DEVICES returns when its `limit` is 0.
    public static let defaultQueryLimit: UInt32 = 100
    /// Longest `cursor` of a paged request, in bytes: a `next_cursor` the relay gave is never longer.
    public static let maximumCursorBytes = 1_024
    /// Most entries of a list that names no recipients: the topics one device subscribes to, the preferences one
    /// SET_PREFERENCES sets, the arguments of each of an alert's localized strings, a SEND's template values.
    public static let maximumListCount = 256

    /// The instants `send_at_ms` may name when the relay's clock reads `nowMilliseconds`: from 2000-01-01 to
    /// ``scheduleHorizonMilliseconds`` after the clock (a clock past the end of time counts as the end of time).
    public static func sendAtRange(nowMilliseconds: Int64) -> ClosedRange<Int64> {
        // A clock before the earliest time (a test's) still makes a range, never a trap.
        let latest = max(
            earliestSendAtMilliseconds, min(nowMilliseconds, latestMilliseconds) + scheduleHorizonMilliseconds)
        return earliestSendAtMilliseconds...latest
    }

    /// Whether `scalar` can break or disguise a line of text: a control character (Unicode category Cc:
    /// U+0000–U+001F, U+007F–U+009F), a line or paragraph separator (U+2028, U+2029), or a bidirectional
    /// embedding, override or isolate (U+202A–U+202E, U+2066–U+2069). Ids may not hold them, and the relay's
    /// log lines spell them out.
    public static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F, 0x2028...0x202E, 0x2066...0x2069: true
        default: false
        }
    }
}

/// Checks the fields of one request, naming each as `<request>.<field>` in its error (the request alone, `send`, for a
/// rule on several fields).
public struct FieldChecker: Sendable {
    /// The request's name in `field`: `send`, `set_mute`.
    public var request: String

    /// A checker for the fields of `request`.
    public init(_ request: String) {
        self.request = request
    }

    private func fail(_ field: String, _ message: String) -> ProtocolError {
        .invalidArgument("\(request).\(field)", message)
    }

    /// An id: 1 to `maximumBytes` UTF-8 bytes without control characters (``FieldRules/isControl(_:)``); empty
    /// allowed unless `required`.
    public func id(
        _ value: String,
        _ field: String,
        required: Bool = true,
        maximumBytes: Int = FieldRules.maximumIDBytes
    ) throws(ProtocolError) {
        if value.isEmpty {
            if required { throw fail(field, "\(field) is required") }
            return
        }
        guard value.utf8.count <= maximumBytes else {
            throw fail(field, "\(field) is at most \(maximumBytes) bytes, not \(value.utf8.count)")
        }
        guard !value.unicodeScalars.contains(where: FieldRules.isControl) else {
            throw fail(field, "\(field) may not contain control characters")
        }
    }

    /// A list of at most `maximum` entries (``WireShape`` checks the same count before decoding).
    public func count(_ count: Int, _ field: String, maximum: Int) throws(ProtocolError) {
        guard count <= maximum else {
            throw fail(field, "\(field) names \(count) entries; at most \(maximum) are allowed")
        }
    }

    /// A list of recipients or exclusions of at most `maximum` entries: `TOO_MANY_RECIPIENTS` naming it beyond
    /// (``WireShape`` checks the same count before decoding).
    public func recipients(_ count: Int, _ field: String, maximum: Int) throws(ProtocolError) {
        guard count <= maximum else {
            throw ProtocolError(
                .tooManyRecipients,
                "\(field) names \(count) entries; at most \(maximum) recipients or exclusions are allowed",
                field: "\(request).\(field)")
        }
    }

    /// Each id of a list.
    public func ids(_ values: [String], _ field: String) throws(ProtocolError) {
        for value in values { try id(value, field) }
    }

    /// Free text (alert text, template values, JSON): any UTF-8 but NUL; its size is bounded by the frame
    /// and by APNs' payload limit.
    public func text(_ value: String, _ field: String) throws(ProtocolError) {
        guard !value.utf8.contains(0) else { throw fail(field, "\(field) may not contain NUL") }
    }

    /// A device token of `provider` (``PushProvider/storedToken(_:)``), or of any provider when the request does not
    /// name one (``PushProvider/checkAnyToken(_:)``).
    public func token(_ value: String, _ field: String, provider: PushProvider? = nil) throws(ProtocolError) {
        let refusal: TokenRefusal?
        if let provider {
            if case .failure(let failure) = provider.storedToken(value) { refusal = failure } else { refusal = nil }
        } else {
            refusal = PushProvider.checkAnyToken(value)
        }
        if let refusal { throw fail(field, refusal.message) }
    }

    /// A name of the IANA time zone database, canonical or a link (``FieldRules/timeZoneNames``: `Europe/Berlin`,
    /// `US/Eastern`, `Japan`, `UTC`), spelled as the database spells it; empty allowed.
    public func timeZone(_ value: String, _ field: String) throws(ProtocolError) {
        guard !value.isEmpty else { return }
        // An id of at most 64 bytes first, so that the message below repeats a short, printable value.
        try id(value, field, maximumBytes: 64)
        guard FieldRules.timeZoneNames.contains(value) else {
            throw fail(
                field,
                "'\(value)' is not a name of the IANA time zone database (tzdata \(FieldRules.timeZoneDatabaseVersion)) "
                    + "such as Europe/Berlin, US/Eastern or UTC")
        }
    }

    /// A wall-clock date and time (``LocalDateTime``) that every time zone reaches within `range` (Unix
    /// milliseconds): the first zone to reach it, ``FieldRules/firstZoneOffsetMilliseconds`` ahead of UTC, not before
    /// its lower bound, and the last, ``FieldRules/lastZoneOffsetMilliseconds`` behind UTC, not after its upper bound.
    public func localDateTime(_ value: String, _ field: String, in range: ClosedRange<Int64>) throws(ProtocolError) {
        let local: LocalDateTime
        do {
            local = try LocalDateTime(parsing: value)
        } catch {
            switch error {
            case .notTheFormat:
                throw fail(
                    field, "\(field) is a wall-clock time YYYY-MM-DDTHH:MM or YYYY-MM-DDTHH:MM:SS, without a zone")
            case .notADay: throw fail(field, "\(field): \(value.prefix(10)) is not a day of the calendar")
            case .notATimeOfDay:
                throw fail(field, "\(field): \(value.dropFirst(11)) is not a time of day (00:00:00 to 23:59:59)")
            }
        }
        let wallClock = local.utcMilliseconds
        let earliest = LocalDateTime(utcMilliseconds: range.lowerBound + FieldRules.firstZoneOffsetMilliseconds)
        let latest = LocalDateTime(utcMilliseconds: range.upperBound - FieldRules.lastZoneOffsetMilliseconds)
        guard wallClock - FieldRules.firstZoneOffsetMilliseconds >= range.lowerBound,
            wallClock + FieldRules.lastZoneOffsetMilliseconds <= range.upperBound
        else {
            throw fail(
                field,
                "\(field) is a wall-clock time every time zone reaches within send_at_ms's range: from \(earliest) to "
                    + "\(latest), not \(local)")
        }
    }

    /// A time in Unix milliseconds within `range`.
    public func milliseconds(_ value: Int64, _ field: String, in range: ClosedRange<Int64>) throws(ProtocolError) {
        guard range.contains(value) else {
            throw fail(field, "\(field) is a Unix time in milliseconds from \(range.lowerBound) to \(range.upperBound)")
        }
    }

    /// A whole number within `range`.
    public func number<N: BinaryInteger>(_ value: N, _ field: String, in range: ClosedRange<N>) throws(ProtocolError) {
        guard range.contains(value) else {
            throw fail(field, "\(field) is from \(range.lowerBound) to \(range.upperBound), not \(value)")
        }
    }

    /// A paged request's `cursor`: empty, or up to ``FieldRules/maximumCursorBytes`` of base64url (what a
    /// `next_cursor` is); whether it names a place in the answer is for the relay to say when it reads it.
    public func cursor(_ value: String, _ field: String) throws(ProtocolError) {
        guard value.utf8.count <= FieldRules.maximumCursorBytes else {
            throw fail(field, "\(field) is at most \(FieldRules.maximumCursorBytes) bytes, not \(value.utf8.count)")
        }
        guard value.utf8.allSatisfy({ $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || $0.isASCIIAlphanumeric })
        else {
            throw fail(field, "\(field) is a next_cursor the relay gave, unchanged")
        }
    }

    /// A condition on the request as a whole or on one field, with the message when it fails.
    public func require(_ condition: Bool, _ field: String, _ message: String) throws(ProtocolError) {
        guard condition else { throw field.isEmpty ? .invalidArgument(request, message) : fail(field, message) }
    }
}

extension UInt8 {
    /// Whether the byte is an ASCII letter or digit.
    fileprivate var isASCIIAlphanumeric: Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self)
    }
}
