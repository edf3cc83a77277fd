/// A wall-clock date and time without a time zone, as `Send.send_at_local` gives it: `YYYY-MM-DDTHH:MM` or
/// `YYYY-MM-DDTHH:MM:SS`, a real day of the Gregorian calendar (`2026-02-29` and `2026-04-31` are none) at a time
/// from `00:00:00` to `23:59:59`.
public struct LocalDateTime: Sendable, Hashable, CustomStringConvertible {
    /// The year, 0 to 9999.
    public var year: Int
    /// The month, 1 to 12.
    public var month: Int
    /// The day of the month, 1 to its last day.
    public var day: Int
    /// The hour, 0 to 23.
    public var hour: Int
    /// The minute, 0 to 59.
    public var minute: Int
    /// The second, 0 to 59.
    public var second: Int

    /// Why a text is not a ``LocalDateTime``.
    public enum Problem: Error, Sendable, Hashable {
        /// The text is not `YYYY-MM-DDTHH:MM` or `YYYY-MM-DDTHH:MM:SS` in ASCII digits.
        case notTheFormat
        /// The date is not a day of the calendar (`2026-02-31`).
        case notADay
        /// The time is not a time of day (`24:00`, `12:60`).
        case notATimeOfDay
    }

    /// The wall-clock time `text` names.
    public init(parsing text: String) throws(Problem) {
        let bytes = Array(text.utf8)
        let separators: [Int: UInt8] = [
            4: UInt8(ascii: "-"), 7: UInt8(ascii: "-"), 10: UInt8(ascii: "T"), 13: UInt8(ascii: ":"),
            16: UInt8(ascii: ":"),
        ]
        guard bytes.count == 16 || bytes.count == 19 else { throw .notTheFormat }
        for (index, byte) in bytes.enumerated() {
            if let separator = separators[index] {
                guard byte == separator else { throw .notTheFormat }
            } else {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { throw .notTheFormat }
            }
        }
        func number(_ range: Range<Int>) -> Int {
            bytes[range].reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
        }
        year = number(0..<4)
        month = number(5..<7)
        day = number(8..<10)
        hour = number(11..<13)
        minute = number(14..<16)
        second = bytes.count == 19 ? number(17..<19) : 0
        guard (1...12).contains(month), (1...Self.days(inMonth: month, of: year)).contains(day) else {
            throw .notADay
        }
        guard hour < 24, minute < 60, second < 60 else { throw .notATimeOfDay }
    }

    /// The wall-clock time in UTC of the instant `milliseconds` after 1970 (its milliseconds dropped), for a year
    /// from 0 to 9999.
    public init(utcMilliseconds milliseconds: Int64) {
        let seconds = milliseconds.floorDivided(by: 1_000)
        let days = seconds.floorDivided(by: 86_400)
        let secondOfDay = Int(seconds - days * 86_400)
        // Howard Hinnant's civil_from_days: the proleptic Gregorian date of a day count from 1970-01-01.
        let shifted = days + 719_468
        let era = shifted.floorDivided(by: 146_097)
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        day = Int(dayOfYear - (153 * monthIndex + 2) / 5 + 1)
        month = Int(monthIndex < 10 ? monthIndex + 3 : monthIndex - 9)
        year = Int(yearOfEra + era * 400 + (month <= 2 ? 1 : 0))
        hour = secondOfDay / 3_600
        minute = secondOfDay % 3_600 / 60
        second = secondOfDay % 60
    }

    /// The Unix time in milliseconds of this wall-clock time in UTC; a time zone `offset` ahead of UTC reaches it
    /// `offset` earlier.
    public var utcMilliseconds: Int64 {
        // Howard Hinnant's days_from_civil: the day count from 1970-01-01 of a proleptic Gregorian date.
        let shiftedYear = Int64(month <= 2 ? year - 1 : year)
        let era = shiftedYear.floorDivided(by: 400)
        let yearOfEra = shiftedYear - era * 400
        let dayOfYear = Int64((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1)
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        return (days * 86_400 + Int64(hour * 3_600 + minute * 60 + second)) * 1_000
    }

    /// `YYYY-MM-DDTHH:MM:SS`.
    public var description: String {
        func digits(_ value: Int, _ count: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, count - text.count)) + text
        }
        return "\(digits(year, 4))-\(digits(month, 2))-\(digits(day, 2))T\(digits(hour, 2)):\(digits(minute, 2)):"
            + digits(second, 2)
    }

    /// The days of `month` in `year` of the Gregorian calendar.
    static func days(inMonth month: Int, of year: Int) -> Int {
        switch month {
        case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }
}

extension Int64 {
    /// The quotient rounded down (towards minus infinity), not towards zero.
    fileprivate func floorDivided(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}
