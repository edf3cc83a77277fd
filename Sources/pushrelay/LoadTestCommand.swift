import ArgumentParser
import Foundation
import LoadTest

/// `pushrelay loadtest`: the relay under load, measured; see ``LoadTest``.
struct LoadTestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "loadtest",
        abstract: "Load-test the relay: fan-outs, single and group sends over the wire protocol, measured.",
        discussion: """
            Starts, in --work-dir, an embedded PostgreSQL cluster, the APNs simulator and a relay (`pushrelay \
            serve`) as separate processes; makes the tenants (the tenant files with the run's rate and a \
            `loadtest` topic), a signing key and credential each, and their synthetic devices in bulk; then opens \
            idle connections, makes single and group sends, runs the engine alone (`pushrelay apns push`) as a \
            baseline, and one fan-out per size, each to a whole topic of its own tenant. With --fcm-fan-out or \
            --mixed-fan-out it starts the FCM simulator (`pushrelay fcm-sim`) too, stores its service account for \
            --fcm-tenant, and runs those fan-outs after the APNs ones. It shows progress while it \
            runs, prints a report and writes it to --output as loadtest-report.json, .txt and .svg (chart). Exit \
            status 1 when an accepted notification is not accounted for (no row, or a job that did not complete).
            """
    )

    @Option(help: "Fan-out sizes in devices, comma-separated (at most one per tenant).")
    var fanOuts = "10000,100000,1000000"
    @Option(
        help: """
            Times each fan-out of at most 10,000 devices runs (it lasts a fraction of a second): the report gives \
            the run of median time, and every run's time.
            """
    )
    var shortFanOutRuns = 5
    @Option(help: "Single sends (one user each), one at a time, the tenants in turn.")
    var singles = 2_000
    @Option(help: "Group sends, spread over the tenants.")
    var groups = 400
    @Option(help: "Users per group send.")
    var groupSize = 10
    @Option(help: "Idle connections to open (0 skips).")
    var idleConnections = 1_000
    @Option(help: "Notifications the engine baseline sends (0 skips).")
    var baselineCount = 200_000
    @Option(help: "HTTP/2 connections per APNs pool, for the relay and the baseline.")
    var apnsConnections = 2
    @Option(
        name: .customLong("apns-latency-ms"),
        help: "Milliseconds the run's APNs simulator waits before each answer, as Apple's round trip (0: loopback).")
    var apnsLatencyMilliseconds = 0
    @Option(
        name: .customLong("apns-latency-jitter-ms"),
        help: "Up to this many milliseconds more before each answer, drawn for each.")
    var apnsLatencyJitterMilliseconds = 0
    @Option(
        help: """
            Devices of the FCM fan-out (0 skips; a full run uses 1000000): a topic of FCM devices of --fcm-tenant, \
            through the FCM simulator; reported with its relay CPU against the APNs fan-out of the same size.
            """
    )
    var fcmFanOut = 0
    @Option(help: "Devices of the mixed fan-out (0 skips): one send to a topic of --fcm-tenant, half APNs, half FCM.")
    var mixedFanOut = 0
    @Option(help: "The tenant of the FCM and mixed fan-outs (its file names a Firebase project); not in --tenant-ids.")
    var fcmTenant = "dispo"
    @Option(
        name: .customLong("fcm-latency-ms"),
        help: "Milliseconds the run's FCM simulator waits before each answer, as Google's round trip (0: loopback).")
    var fcmLatencyMilliseconds = 0
    @Option(
        name: .customLong("fcm-latency-jitter-ms"),
        help: "Up to this many milliseconds more before each FCM answer, drawn for each.")
    var fcmLatencyJitterMilliseconds = 0
    @Option(
        help: """
            Each tenant's notifications_per_second during the run: the default lets every fan-out go as fast as the \
            relay can; a lower one paces the APNs and FCM fan-outs alike, to compare their CPU at one rate.
            """
    )
    var notificationsPerSecond = 1_000_000
    @Option(help: "Tenant ids, comma-separated: fan-outs go to them in this order, smallest first.")
    var tenantIds = "argus,familyportal,circl,anky"
    @Option(help: "Folder of tenant files.")
    var tenants = "Tenants"
    @Option(help: "Folder for the run's PostgreSQL cluster, simulator CA and logs (default: a new temporary folder).")
    var workDir: String?
    @Flag(help: "Keep the work folder (its cluster and logs) after the run.")
    var keepWorkDir = false
    @Option(help: "Folder for loadtest-report.json, .txt and .svg.")
    var output = "."
    @Option(help: "Seconds between progress lines when the output is not a terminal.")
    var progressInterval = 5.0

    func run() async throws {
        let sizes = fanOuts.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        let parsed = sizes.compactMap { Int($0.replacingOccurrences(of: "_", with: "")) }
        guard parsed.count == sizes.count else { throw ValidationError("--fan-outs must be numbers, got \(fanOuts)") }
        let work = workDir ?? NSTemporaryDirectory() + "pushrelay-loadtest-\(UUID().uuidString.prefix(8))"
        let executable =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var options = LoadTestOptions(workDirectory: work, outputDirectory: output, executable: executable)
        options.fanOutSizes = parsed
        options.shortFanOutRuns = shortFanOutRuns
        options.singles = singles
        options.groups = groups
        options.groupSize = groupSize
        options.idleConnections = idleConnections
        options.baselineCount = baselineCount
        options.apnsConnections = apnsConnections
        options.apnsLatencyMilliseconds = apnsLatencyMilliseconds
        options.apnsLatencyJitterMilliseconds = apnsLatencyJitterMilliseconds
        options.fcmFanOut = fcmFanOut
        options.mixedFanOut = mixedFanOut
        options.fcmTenantID = fcmTenant
        options.fcmLatencyMilliseconds = fcmLatencyMilliseconds
        options.fcmLatencyJitterMilliseconds = fcmLatencyJitterMilliseconds
        options.notificationsPerSecond = notificationsPerSecond
        options.tenantIDs = tenantIds.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        options.tenantsFolder = tenants
        options.progressInterval = progressInterval
        say("work folder: \(work)")
        let report: LoadTestReport
        do {
            report = try await LoadTest.run(options)
        } catch {
            say("load test failed: \(error)\n(work folder kept: \(work))")
            throw ExitCode(2)
        }
        if !keepWorkDir && workDir == nil { try? FileManager.default.removeItem(atPath: work) }
        say("\n\(report.text)\n\nwritten: \(output)/loadtest-report.json, .txt, .svg")
        if !report.accounting.consistent { throw ExitCode(1) }
    }

    /// Writes a line to standard output unbuffered, in order with the progress lines.
    private func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}
