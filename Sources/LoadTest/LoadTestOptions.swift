/// What `pushrelay loadtest` runs.
package struct LoadTestOptions: Sendable {
    /// Fan-out sizes in devices, each sent by its own tenant (at most four, one per tenant).
    package var fanOutSizes = [10_000, 100_000, 1_000_000]
    /// Times each short fan-out (at most ``shortFanOutLimit`` devices) runs: such a fan-out lasts a fraction of a
    /// second, and one run measures the machine's moment as much as the relay. The report gives the run of median
    /// time, and every run's time.
    package var shortFanOutRuns = 5
    /// The largest fan-out that runs ``shortFanOutRuns`` times; larger ones run once.
    package static let shortFanOutLimit = 10_000
    /// Single sends (one user each), one at a time, the tenants in turn.
    package var singles = 2_000
    /// Group sends, spread over the tenants.
    package var groups = 400
    /// Users per group send.
    package var groupSize = 10
    /// Idle backend connections opened to measure their cost (0: skip).
    package var idleConnections = 1_000
    /// Notifications the engine baseline (`pushrelay apns push`) sends (0: skip).
    package var baselineCount = 200_000
    /// HTTP/2 connections per APNs pool, for the relay and the baseline.
    package var apnsConnections = 2
    /// Milliseconds the run's APNs simulator waits before each answer (Apple's round trip; 0: loopback).
    package var apnsLatencyMilliseconds = 0
    /// Up to this many milliseconds more, drawn for each answer.
    package var apnsLatencyJitterMilliseconds = 0
    /// Devices of the FCM fan-out (provider `fcm` only, through ``fcmTenantID``; 0: skip). A full run uses
    /// 1,000,000, the size of the largest APNs fan-out, whose relay CPU it is compared with.
    package var fcmFanOut = 0
    /// Devices of the mixed fan-out (0: skip): one send to a topic of ``fcmTenantID`` whose devices are half APNs
    /// (the smaller half for an odd count) and half FCM.
    package var mixedFanOut = 0
    /// The tenant of the FCM and mixed fan-outs: its file names a Firebase project (`fcm: project_id:`) and has an
    /// alert type mapped to FCM. Not one of ``tenantIDs``: the APNs tenants' fan-outs stay as they are.
    package var fcmTenantID = "dispo"
    /// Milliseconds the run's FCM simulator waits before each answer (Google's round trip; 0: loopback).
    package var fcmLatencyMilliseconds = 0
    /// Up to this many milliseconds more, drawn for each FCM answer.
    package var fcmLatencyJitterMilliseconds = 0
    /// The tenants' ids, in the order fan-outs are given to them (smallest fan-out first).
    package var tenantIDs = ["argus", "familyportal", "circl", "anky"]
    /// Folder of the tenant files the run's tenants are made from.
    package var tenantsFolder = "Tenants"
    /// The tenants' notifications per second during the run (their files' limits are for production).
    package var notificationsPerSecond = 1_000_000
    /// Folder for the run's PostgreSQL cluster, simulator certificates and logs.
    package var workDirectory: String
    /// Folder the report (`loadtest-report.json`, `.svg`, `.txt`) is written to.
    package var outputDirectory: String
    /// The `pushrelay` executable started as relay, simulator and baseline.
    package var executable: String
    /// Seconds between progress lines when the output is not a terminal.
    package var progressInterval = 5.0

    /// Options with the defaults of a full run.
    package init(workDirectory: String, outputDirectory: String, executable: String) {
        self.workDirectory = workDirectory
        self.outputDirectory = outputDirectory
        self.executable = executable
    }

    /// Whether the run sends to FCM (an FCM or a mixed fan-out): it then starts the FCM simulator and makes the
    /// FCM tenant.
    package var runsFCM: Bool { fcmFanOut > 0 || mixedFanOut > 0 }

    /// Checks the options; throws what is wrong.
    package func validate() throws(LoadTestError) {
        guard fanOutSizes.count <= tenantIDs.count else {
            throw LoadTestError("at most \(tenantIDs.count) fan-out sizes (one per tenant)")
        }
        guard fanOutSizes.allSatisfy({ $0 > 0 && $0 <= 10_000_000 }) else {
            throw LoadTestError("fan-out sizes must be between 1 and 10,000,000")
        }
        guard singles >= 0, groups >= 0, groupSize > 0, groupSize <= 10_000, idleConnections >= 0,
            baselineCount >= 0, apnsConnections > 0, notificationsPerSecond > 0
        else { throw LoadTestError("counts must not be negative; group size 1-10,000; APNs connections > 0") }
        guard (0...10_000).contains(apnsLatencyMilliseconds), (0...10_000).contains(apnsLatencyJitterMilliseconds)
        else { throw LoadTestError("the APNs latency and its jitter must be 0-10,000 ms") }
        guard (0...10_000_000).contains(fcmFanOut), (0...10_000_000).contains(mixedFanOut) else {
            throw LoadTestError("the FCM and mixed fan-outs must be between 0 and 10,000,000 devices")
        }
        guard mixedFanOut != 1 else { throw LoadTestError("a mixed fan-out needs at least 2 devices (one of each)") }
        guard (0...10_000).contains(fcmLatencyMilliseconds), (0...10_000).contains(fcmLatencyJitterMilliseconds)
        else { throw LoadTestError("the FCM latency and its jitter must be 0-10,000 ms") }
        guard !runsFCM || !tenantIDs.contains(fcmTenantID) else {
            throw LoadTestError("the FCM tenant \(fcmTenantID) must not be one of the APNs fan-outs' tenants")
        }
        guard (1...25).contains(shortFanOutRuns) else { throw LoadTestError("short fan-out runs must be 1-25") }
        guard !tenantIDs.isEmpty else { throw LoadTestError("no tenants") }
    }
}
