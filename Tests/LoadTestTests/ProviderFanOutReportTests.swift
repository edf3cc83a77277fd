import Foundation
import Testing

@testable import LoadTest

/// The FCM and mixed fan-outs in the report: their relay CPU against the APNs fan-out of the same size, their rows
/// of the text report, and their JSON keys (which `check-loadtest-report.py` reads).
@Suite struct ProviderFanOutReportTests {
    /// A fan-out of `size` devices that took `cpuPer100k` relay CPU seconds per 100,000.
    private func fanOut(_ size: Int, tenant: String, cpuPer100k: Double, fcmDevices: Int? = nil)
        -> LoadTestReport.FanOut
    {
        var fanOut = LoadTestReport.FanOut(
            size: size, tenant: tenant, jobID: "job-\(tenant)-\(size)", ackMilliseconds: 2, seconds: 4,
            notificationsPerSecond: Double(size) / 4, delivered: size, failed: 0, skipped: 0, rows: size,
            relayCPUSeconds: cpuPer100k * Double(size) / 100_000, relayCPUSecondsPer100k: cpuPer100k,
            relayPeakRSSMiB: 80, postgresRowsPerSecond: 1000, deliveryRowsPerSecond: 1000)
        fanOut.fcmDevices = fcmDevices
        return fanOut
    }

    /// A report of APNs fan-outs of 10,000 and 1,000,000 devices, an FCM fan-out of 1,000,000 and a mixed one of
    /// `mixedSize`.
    private func report(mixedSize: Int) -> LoadTestReport {
        var report = LoadTestReport(
            date: "2026-01-01T00:00:00Z", machine: "test",
            configuration: .init(
                fanOutSizes: [10_000, 1_000_000], shortFanOutRuns: 1, singles: 0, groups: 0, groupSize: 1,
                backendConnections: 2, idleConnections: 0, baselineCount: 0, apnsConnections: 2, tenants: [],
                tenantChanges: "", fcmFanOut: 1_000_000, mixedFanOut: mixedSize, fcmTenant: "dispo"),
            fanOuts: [
                fanOut(10_000, tenant: "argus", cpuPer100k: 3), fanOut(1_000_000, tenant: "circl", cpuPer100k: 2),
            ],
            relay: .init(peakRSSMiB: 80, cpuSeconds: 60), outcomes: [],
            accounting: .init(accepted: 0, recorded: 0, jobs: 0, jobsCompleted: 0, problems: []), timeline: [])
        report.fcmFanOut = fanOut(1_000_000, tenant: "dispo", cpuPer100k: 2.5, fcmDevices: 1_000_000)
        report.mixedFanOut = fanOut(mixedSize, tenant: "dispo", cpuPer100k: 3.3, fcmDevices: mixedSize - mixedSize / 2)
        return report
    }

    @Test func fcmAndMixedFanOutsAreComparedWithTheAPNsFanOutOfTheirSize() throws {
        var report = report(mixedSize: 10_000)
        report.compareWithAPNs()
        #expect(try #require(report.fcmFanOut?.apnsCPURatio) == 1.25)
        #expect(abs(try #require(report.mixedFanOut?.apnsCPURatio) - 1.1) < 1e-9)
    }

    @Test func aFanOutWithoutAnAPNsOneOfItsSizeHasNoRatio() {
        var report = report(mixedSize: 20_000)
        report.fanOuts[1].relayCPUSecondsPer100k = 0
        report.compareWithAPNs()
        #expect(report.mixedFanOut?.apnsCPURatio == nil)
        // An APNs fan-out that took no CPU gives no ratio either (rather than infinity).
        #expect(report.fcmFanOut?.apnsCPURatio == nil)
    }

    @Test func theTextHasARowForEachWithItsSplitAndRatioAndTheTarget() {
        var report = report(mixedSize: 10_000)
        report.compareWithAPNs()
        let lines = report.text.split(separator: "\n").map(String.init)
        let fcm = lines.first { $0.hasPrefix("FCM 1000000 ") }
        let mixed = lines.first { $0.hasPrefix("mixed 10000 ") }
        #expect(fcm?.contains("0 + 1000000") == true)
        #expect(fcm?.contains("1.25x") == true)
        #expect(mixed?.contains("5000 + 5000") == true)
        #expect(mixed?.contains("1.10x") == true)
        #expect(lines.contains { $0.contains("FCM fan-out 1000000") && $0.contains("1.25x") && $0.hasSuffix("met") })
        #expect(!lines.contains { $0.contains("mixed fan-out 10000") && $0.contains("target") })
    }

    @Test func aTargetMissedSaysSo() {
        var report = report(mixedSize: 10_000)
        report.fcmFanOut?.relayCPUSecondsPer100k = 3.2
        report.compareWithAPNs()
        #expect(
            report.text.contains(
                "relay CPU per notification 1.60x the APNs fan-out of 1000000's; target at most "
                    + "1.5x: NOT met"))
    }

    @Test func aRunWithoutFCMHasNoProviderRows() {
        var report = report(mixedSize: 10_000)
        report.fcmFanOut = nil
        report.mixedFanOut = nil
        #expect(!report.text.contains("provider fan-out"))
    }

    @Test func theJSONKeysAreThoseTheCheckScriptReads() throws {
        var report = report(mixedSize: 10_000)
        report.compareWithAPNs()
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        let json = try #require(try JSONSerialization.jsonObject(with: encoder.encode(report)) as? [String: Any])
        let fcm = try #require(json["fcm_fan_out"] as? [String: Any])
        #expect(fcm["apns_cpu_ratio"] as? Double == 1.25)
        #expect(fcm["fcm_devices"] as? Int == 1_000_000)
        #expect(json["mixed_fan_out"] is [String: Any])
        let configuration = try #require(json["configuration"] as? [String: Any])
        #expect(configuration["fcm_fan_out"] as? Int == 1_000_000)
        #expect(configuration["mixed_fan_out"] as? Int == 10_000)
        #expect(configuration["fcm_tenant"] as? String == "dispo")
    }
}

/// The FCM tenant's synthetic devices: each fan-out's topic reaches exactly its devices, split as it says.
@Suite struct FCMTenantDeviceTests {
    /// The devices of `provider` subscribed to `topic` among `sets`.
    private func count(_ sets: [RunTenant.DeviceSet], _ provider: String, _ topic: String) -> Int {
        sets.filter { $0.provider.rawValue == provider && $0.topics.contains(topic) }.reduce(0) { $0 + $1.range.count }
    }

    @Test(arguments: [(1_000, 3_000), (3_000, 1_000), (2_000, 2_001), (0, 5), (7, 0)])
    func eachTopicReachesItsFanOut(fcm: Int, mixed: Int) {
        var options = LoadTestOptions(workDirectory: "/w", outputDirectory: "/o", executable: "/x")
        options.fcmFanOut = fcm
        options.mixedFanOut = mixed
        let sets = TenantSetup.fcmDeviceSets(options)
        #expect(count(sets, "fcm", RunTenant.fcmTopic) == fcm)
        #expect(count(sets, "apns", RunTenant.fcmTopic) == 0)
        #expect(count(sets, "fcm", RunTenant.mixedTopic) == mixed - mixed / 2)
        #expect(count(sets, "apns", RunTenant.mixedTopic) == mixed / 2)
        #expect(sets.allSatisfy { !$0.range.isEmpty && $0.range.lowerBound >= 0 })
        // No device index twice within a provider: one row each.
        for provider in ["fcm", "apns"] {
            let ranges: [Range<Int>] = sets.filter { $0.provider.rawValue == provider }.map { $0.range }
            let indices: [Int] = ranges.flatMap { Array($0) }
            #expect(Set(indices).count == indices.count)
        }
    }
}
