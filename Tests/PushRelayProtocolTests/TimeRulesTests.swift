import Foundation
import PushRelayProtocol
import Testing

/// Times within the calendar: `send_at_local` is a real wall-clock time within `send_at_ms`'s range, and a time zone
/// is a name of the IANA time zone database, canonical or a link, and nothing else Foundation happens to parse.
@Suite struct TimeRulesTests {
    static let now = FieldRulesTests.now
    static let hour: Int64 = 3_600_000

    static func sendAt(local: String, now: Int64 = TimeRulesTests.now) -> Verdict {
        FieldRulesTests.verdict(FieldRulesTests.with(FieldRulesTests.send) { $0.sendAtLocal = local }, now: now)
    }

    static func zone(_ name: String) -> Verdict {
        FieldRulesTests.verdict(FieldRulesTests.with(FieldRulesTests.registerDevice) { $0.timeZone = name })
    }

    // MARK: - send_at_local

    @Test func sendAtLocalIsAWallClockTimeToTheMinuteOrTheSecond() {
        for local in ["2026-11-22T00:00", "2026-11-22T23:59:59", "2026-06-01T12:30:00", "2026-12-31T23:59"] {
            #expect(Self.sendAt(local: local) == .accepted, "\(local)")
        }
        for local in [
            "2026-11-22", "2026-11-22T00", "2026-11-22 00:00", "2026-11-22t00:00", "2026-11-22T00:00Z",
            "2026-11-22T00:00:00.000", "2026-11-22T00:00+01:00", "2026-1-22T00:00", "2026-11-22T0:00",
            "+2026-11-22T00:00", "-026-11-22T00:00", "２０２６-11-22T00:00", "2026-11-22T00:00:0", "tomorrow at noon",
            "99999999-01-01T00:00", "202600000000000000-01-01T00:00", "2026-11-22\n00:00",
            String(repeating: "9", count: 1_000),
        ] {
            #expect(Self.sendAt(local: local) == .invalid("send.send_at_local"), "\(local.debugDescription)")
        }
    }

    @Test func sendAtLocalIsADayOfTheCalendarAtATimeOfDay() {
        for local in ["2026-02-28T00:00", "2024-02-29T00:00", "2026-04-30T00:00", "2026-12-31T00:00"] {
            #expect(Self.sendAt(local: local) == .accepted, "\(local)")
        }
        for local in [
            "2026-02-29T00:00", "2026-02-31T00:00", "2026-04-31T00:00", "2026-13-01T00:00", "2026-00-10T00:00",
            "2026-06-00T00:00", "2026-06-32T00:00", "2026-06-01T24:00", "2026-06-01T23:60", "2026-06-01T23:59:60",
        ] {
            #expect(Self.sendAt(local: local) == .invalid("send.send_at_local"), "\(local)")
        }
        // 2100 is no leap year; 2000 is.
        #expect(Self.sendAt(local: "2100-02-29T00:00", now: 4_102_444_800_000) == .invalid("send.send_at_local"))
        #expect(Self.sendAt(local: "2000-02-29T00:00") == .accepted)
    }

    @Test func everyTimeZoneReachesSendAtLocalWithinSendAtMsRange() {
        // The last zone (UTC−12) reaches it at most 366 days after the clock; the first (UTC+14) not before 2000.
        let latest = FieldRules.sendAtRange(nowMilliseconds: Self.now).upperBound - 12 * Self.hour
        let lastAccepted = LocalDateTime(utcMilliseconds: latest)
        #expect(lastAccepted.description == "2027-05-29T08:26:40")
        #expect(Self.sendAt(local: "2027-05-29T08:26:40") == .accepted)
        #expect(Self.sendAt(local: "2027-05-29T08:26:41") == .invalid("send.send_at_local"))
        #expect(Self.sendAt(local: "2027-05-30T00:00") == .invalid("send.send_at_local"))
        #expect(Self.sendAt(local: "9999-12-31T23:59:59") == .invalid("send.send_at_local"))
        // A past time sends at once, as send_at_ms's.
        #expect(Self.sendAt(local: "2000-01-01T14:00") == .accepted)
        #expect(Self.sendAt(local: "2000-01-01T13:59:59") == .invalid("send.send_at_local"))
        #expect(Self.sendAt(local: "1999-12-31T23:59") == .invalid("send.send_at_local"))
        #expect(Self.sendAt(local: "0000-01-01T00:00") == .invalid("send.send_at_local"))
        // The horizon moves with the clock, which is capped at the end of time as send_at_ms's is.
        #expect(Self.sendAt(local: "2027-05-30T00:00", now: Self.now + 86_400_000) == .accepted)
        #expect(Self.sendAt(local: "9999-12-31T23:59:59", now: .max) == .accepted)
    }

    @Test func sendAtLocalIsNotGivenWithSendAtMs() {
        let both = FieldRulesTests.with(FieldRulesTests.send) {
            $0.sendAtLocal = "2026-11-22T00:00"
            $0.sendAtMs = Self.now
        }
        #expect(FieldRulesTests.verdict(both) == .invalid("send.send_at_local"))
    }

    @Test func theRefusalSaysWhatIsWrong() {
        let send = FieldRulesTests.with(FieldRulesTests.send) { $0.sendAtLocal = "2026-02-31T00:00" }
        #expect(Self.message(send).contains("2026-02-31 is not a day of the calendar"))
        let late = FieldRulesTests.with(FieldRulesTests.send) { $0.sendAtLocal = "2099-01-01T00:00" }
        #expect(Self.message(late).contains("from 2000-01-01T14:00:00 to 2027-05-29T08:26:40"))
        let garbled = FieldRulesTests.with(FieldRulesTests.send) { $0.sendAtLocal = "99999999-01-01T00:00" }
        #expect(Self.message(garbled).contains("YYYY-MM-DDTHH:MM or YYYY-MM-DDTHH:MM:SS"))
    }

    static func message(_ send: Pushrelay_V1_Send) -> String {
        do {
            try send.validate(limits: ProtocolLimits(), nowMilliseconds: now)
            return ""
        } catch {
            return error.message
        }
    }

    @Test func wallClockTimesConvertBothWaysAcrossTheCalendar() throws {
        for text in [
            "1970-01-01T00:00:00", "2000-02-29T12:34:56", "2026-11-22T00:00:00", "1969-12-31T23:59:59",
            "1600-02-29T00:00:00", "9999-12-31T23:59:59", "2100-03-01T00:00:00",
        ] {
            let local = try LocalDateTime(parsing: text)
            #expect(local.description == text)
            #expect(LocalDateTime(utcMilliseconds: local.utcMilliseconds) == local, "\(text)")
            // Foundation's Gregorian calendar agrees from 1582 on (before, it counts as the Julian calendar).
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = try #require(TimeZone(identifier: "UTC"))
            let date = try #require(
                calendar.date(
                    from: DateComponents(
                        year: local.year, month: local.month, day: local.day, hour: local.hour,
                        minute: local.minute, second: local.second)))
            #expect(Int64(date.timeIntervalSince1970 * 1_000) == local.utcMilliseconds, "\(text)")
        }
        let yearZero = try LocalDateTime(parsing: "0000-01-01T00:00")
        #expect(LocalDateTime(utcMilliseconds: yearZero.utcMilliseconds) == yearZero)
        #expect(try LocalDateTime(parsing: "2026-11-22T07:05").second == 0)
        #expect(LocalDateTime(utcMilliseconds: -1).description == "1969-12-31T23:59:59")
    }

    // MARK: - Time zones

    @Test func canonicalNamesAndLinksOfTheDatabaseAreAccepted() {
        for zone in [
            "Europe/Berlin", "America/Argentina/Buenos_Aires", "Asia/Kolkata", "Europe/Kyiv", "America/Coyhaique",
            "Etc/GMT+5", "Etc/GMT-14", "Etc/UTC", "EST5EDT", "CST6CDT", "EST", "CET", "WET",
            // Links: old names, country names and the backward ones.
            "Japan", "US/Eastern", "US/Pacific", "Asia/Calcutta", "Europe/Kiev", "America/Buenos_Aires", "GB",
            "Canada/Eastern", "UTC", "GMT", "Zulu", "Universal", "GMT0", "Etc/GMT+0",
        ] {
            #expect(Self.zone(zone) == .accepted, "\(zone)")
        }
    }

    @Test func namesOutsideTheDatabaseAreRefusedThoughFoundationParsesThem() {
        // Foundation (ICU) reads each of these as a time zone; none is a name of the IANA database.
        for zone in [
            "GMT+5", "GMT+05:00", "UTC+01:00", "PST", "JST", "IST", "AET", "SystemV/AST4", "US/Pacific-New", "Factory",
        ] {
            #expect(TimeZone(identifier: zone) != nil, "\(zone)")
            #expect(Self.zone(zone) == .invalid("register_device.time_zone"), "\(zone)")
        }
        for zone in [
            "europe/berlin", "Europe/Berlin ", " UTC", "utc", "Mars/Olympus", "/",
            "Europe/" + String(repeating: "a", count: 58),
        ] {
            #expect(Self.zone(zone) == .invalid("register_device.time_zone"), "\(zone.debugDescription)")
        }
    }

    @Test func foundationKnowsEveryNameTheRuleAccepts() {
        #expect(FieldRules.timeZoneNames.count > 590)
        for name in FieldRules.timeZoneNames.sorted() {
            #expect(TimeZone(identifier: name) != nil, "\(name)")
        }
        #expect(!FieldRules.timeZoneNames.contains("Factory"))
    }

    @Test func theNamesAreTheZonesAndLinksOfThisMachinesDatabase() throws {
        let path = "/usr/share/zoneinfo/tzdata.zi"
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            Issue.record("\(path) is missing: apt-get install tzdata")
            return
        }
        var version = ""
        var names: Set<String> = []
        for line in text.split(separator: "\n") {
            let words = line.split(separator: " ").map(String.init)
            if words.count >= 3, words[0] == "#", words[1] == "version" { version = words[2] }
            if words.count >= 2, words[0] == "Z", words[1] != "Factory" { names.insert(words[1]) }
            if words.count >= 3, words[0] == "L" { names.insert(words[2]) }
        }
        // The database only adds names (a retired one becomes a link): a newer one holds every name of the file.
        #expect(FieldRules.timeZoneNames.subtracting(names).isEmpty)
        if version == FieldRules.timeZoneDatabaseVersion {
            #expect(names == FieldRules.timeZoneNames, "bash Protocol/generate-time-zones.sh writes them again")
        }
    }
}
