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
        guard (1...25).contains(shortFanOutRuns) else { throw LoadTestError("short fan-out runs must be 1-25") }
        guard !tenantIDs.isEmpty else { throw LoadTestError("no tenants") }
    }
}
