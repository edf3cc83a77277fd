import EmbeddedPostgres
import Foundation
import Logging
import NIOCore
import NIOPosix
import PushRelayClient
import PushRelayProtocol
import RelayStore
import Synchronization

/// `pushrelay loadtest`: starts PostgreSQL (embedded, in the work folder), the APNs simulator and a relay as
/// separate processes, makes four tenants with synthetic devices in bulk, then drives the relay over the wire
/// protocol: idle connections, single sends, group sends, the engine alone as a baseline and fan-outs; and
/// reports throughput, latency, the relay's memory and CPU, PostgreSQL's rows and every notification's fate.
package enum LoadTest {
    /// Runs the load test and writes its report; returns it. The report says whether every accepted
    /// notification was accounted for (``LoadTestReport/Accounting/consistent``).
    package static func run(_ options: LoadTestOptions) async throws -> LoadTestReport {
        try options.validate()
        let work = options.workDirectory
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: options.outputDirectory, withIntermediateDirectories: true)
        // The embedded cluster runs as an unprivileged user when we are root: it must reach the folder.
        chmod(work, 0o755)
        var logger = Logger(label: "pushrelay.loadtest")
        logger.logLevel = .error
        let postgres = EmbeddedPostgres(dataFolder: work + "/pg", logger: logger)
        try await postgres.start()
        do {
            guard let endpoint = await postgres.endpoint else { throw LoadTestError("PostgreSQL gave no endpoint") }
            let report = try await RelayStore.withStore(configuration: .init(embedded: endpoint), logger: logger) {
                store in
                try await store.migrate()
                return try await LoadTestRun(options: options, store: store).run()
            }
            try await postgres.stop()
            return report
        } catch {
            try? await postgres.stop()
            throw error
        }
    }
}

/// One run: its processes, clients and measurements.
final class LoadTestRun: Sendable {
    let options: LoadTestOptions
    let store: RelayStore
    let progress: ProgressLine
    let started = Date()
    let clock = ContinuousClock.now
    let readings = Mutex<[ProcessReading]>([])
    let phases = Mutex<[ReportChart.Phase]>([])

    init(options: LoadTestOptions, store: RelayStore) {
        self.options = options
        self.store = store
        self.progress = ProgressLine(interval: options.progressInterval)
    }

    /// Seconds since the run started.
    var now: Double { (ContinuousClock.now - clock).seconds }

    func run() async throws -> LoadTestReport {
        let masterKey = MasterKey.generate()
        let masterKeyFile = options.workDirectory + "/master.key"
        try Data(masterKey.base64.utf8).write(to: URL(fileURLWithPath: masterKeyFile))
        chmod(masterKeyFile, 0o600)
        let (tenants, fcmTenant) = try await phase("setup") {
            try await TenantSetup(options: options, store: store, masterKey: masterKey, progress: progress).run()
        }
        // The FCM tenant's key and bundle id too: half of its mixed fan-out goes to APNs.
        let simulator = try await startSimulator(tenants + [fcmTenant].compactMap { $0 })
        defer { simulator.process.stop(grace: .seconds(10)) }
        var fcmSimulator: FCMSimulator?
        if let fcmTenant { fcmSimulator = try await startFCMSimulator(for: fcmTenant, masterKey: masterKey) }
        defer { fcmSimulator?.process.stop(grace: .seconds(10)) }
        let relay = try await startRelay(masterKeyFile: masterKeyFile, simulator: simulator, fcm: fcmSimulator)
        defer { relay.process.stop() }
        let sampler = Task { await self.sample(pid: relay.process.pid) }
        defer { sampler.cancel() }

        let group = MultiThreadedEventLoopGroup.singleton
        var clients: [String: PushRelayClient] = [:]
        for tenant in tenants + [fcmTenant].compactMap({ $0 }) {
            let client = PushRelayClient(configuration: clientConfiguration(relay.port, tenant), group: group)
            try await client.connect()
            clients[tenant.id] = client
        }

        var report = LoadTestReport(
            date: ISO8601DateFormatter().string(from: started), machine: Self.machine(),
            configuration: .init(
                fanOutSizes: options.fanOutSizes.sorted(), shortFanOutRuns: options.shortFanOutRuns,
                singles: options.singles, groups: options.groups,
                groupSize: options.groupSize, backendConnections: tenants.count,
                idleConnections: options.idleConnections,
                baselineCount: options.baselineCount, apnsConnections: options.apnsConnections,
                apnsLatencyMilliseconds: options.apnsLatencyMilliseconds,
                apnsLatencyJitterMilliseconds: options.apnsLatencyJitterMilliseconds,
                tenants: (tenants + [fcmTenant].compactMap { $0 }).map {
                    .init(id: $0.id, devices: $0.devices, notificationType: $0.notificationType)
                },
                tenantChanges:
                    "notifications_per_second \(options.notificationsPerSecond); topic \(RunTenant.topic) added; "
                    + "quiet hours dropped where no alert type passes them"
                    + (fcmTenant.map { "; \($0.id): topics \(RunTenant.fcmTopic) and \(RunTenant.mixedTopic) added" }
                        ?? ""),
                fcmFanOut: options.fcmFanOut, mixedFanOut: options.mixedFanOut, fcmTenant: fcmTenant?.id,
                fcmLatencyMilliseconds: options.fcmLatencyMilliseconds,
                fcmLatencyJitterMilliseconds: options.fcmLatencyJitterMilliseconds
            ),
            fanOuts: [], relay: .init(peakRSSMiB: 0, cpuSeconds: 0), outcomes: [],
            accounting: .init(accepted: 0, recorded: 0, jobs: 0, jobsCompleted: 0, problems: []), timeline: []
        )
        var jobs: [(tenant: String, id: String, recipients: Int)] = []

        if options.idleConnections > 0, let tenant = tenants.first {
            report.idleConnections = try await phase("idle connections") {
                try await idleConnections(port: relay.port, tenant: tenant, pid: relay.process.pid, group: group)
            }
        }
        if options.singles > 0 {
            let (singles, singleJobs) = try await phase("singles") {
                try await singleSends(tenants: tenants, clients: clients, port: relay.port, group: group)
            }
            report.singles = singles
            jobs += singleJobs
        }
        if options.groups > 0 {
            let (groups, groupJobs) = try await phase("groups") {
                try await groupSends(tenants: tenants, clients: clients)
            }
            report.groups = groups
            jobs += groupJobs
        }
        // The engine alone runs right before the fan-outs it is the baseline of: this machine's speed moves from
        // minute to minute, and measured before the singles and groups it was half a minute older than the
        // first fan-out.
        if options.baselineCount > 0, let largest = tenants.max(by: { $0.devices < $1.devices }) {
            report.engineBaseline = try await phase("engine alone") {
                try await engineBaseline(tenant: largest, simulator: simulator)
            }
        }
        let engineRate = report.engineBaseline.map(\.notificationsPerSecond).flatMap { $0 > 0 ? $0 : nil }
        for (index, size) in options.fanOutSizes.sorted().enumerated() {
            let tenant = tenants[index]
            var (fanOut, fanOutJobs) = try await measureFanOut(
                size: size, tenant: tenant, topic: tenant.fanOutTopic, label: "fan-out \(size)",
                client: clients[tenant.id]!, pid: relay.process.pid, engineRate: engineRate)
            jobs += fanOutJobs
            if let previous = report.fanOuts.last {
                fanOut.timeRatioToPrevious = fanOut.seconds / max(previous.seconds, 0.001)
                fanOut.sizeRatioToPrevious = Double(fanOut.size) / Double(previous.size)
            }
            report.fanOuts.append(fanOut)
        }
        // FCM's after APNs': the same machine's minute, the relay's caches as warm. Not compared with the engine
        // alone, which is APNs's.
        if let fcmTenant {
            let client = clients[fcmTenant.id]!
            if options.fcmFanOut > 0 {
                var (fanOut, fanOutJobs) = try await measureFanOut(
                    size: options.fcmFanOut, tenant: fcmTenant, topic: RunTenant.fcmTopic,
                    label: "FCM fan-out \(options.fcmFanOut)", client: client, pid: relay.process.pid, engineRate: nil)
                fanOut.fcmDevices = options.fcmFanOut
                report.fcmFanOut = fanOut
                jobs += fanOutJobs
            }
            if options.mixedFanOut > 0 {
                var (fanOut, fanOutJobs) = try await measureFanOut(
                    size: options.mixedFanOut, tenant: fcmTenant, topic: RunTenant.mixedTopic,
                    label: "mixed fan-out \(options.mixedFanOut)", client: client, pid: relay.process.pid,
                    engineRate: nil)
                fanOut.fcmDevices = options.mixedFanOut - options.mixedFanOut / 2
                report.mixedFanOut = fanOut
                jobs += fanOutJobs
            }
            report.compareWithAPNs()
        }

        report.accounting = try await account(jobs: jobs, clients: clients)
        let peak = ProcessReading.peakRSS(pid: relay.process.pid) ?? 0
        let last = ProcessReading.read(pid: relay.process.pid, at: now)
        report.relay = .init(peakRSSMiB: Double(peak) / 1_048_576, cpuSeconds: last?.cpuSeconds ?? 0)
        report.outcomes = try await store.deliveryOutcomes(since: started).map {
            .init(outcome: $0.outcome, reason: $0.reason, rows: $0.rows)
        }
        report.timeline = try await timeline()
        for client in clients.values { await client.close() }
        sampler.cancel()
        relay.process.stop()
        if let status = relay.process.exitStatus, status != 0 {
            report.accounting.problems.append("the relay exited with status \(status) after SIGTERM")
        }
        try write(report)
        return report
    }

    // MARK: Processes

    struct Simulator {
        let process: ChildProcess
        let port: Int
        let caFile: String
    }

    struct Relay {
        let process: ChildProcess
        let port: Int
    }

    func startSimulator(_ tenants: [RunTenant]) async throws -> Simulator {
        let folder = options.workDirectory + "/sim"
        var arguments = ["apns-sim", "--host", "127.0.0.1", "--port", "0", "--cert-dir", folder]
        for tenant in tenants {
            arguments += ["--key", "\(tenant.keyID):\(tenant.teamID):\(tenant.keyFile)"]
        }
        for bundleID in Set(tenants.flatMap { $0.configuration.bundleIDs.keys }).sorted() {
            arguments += ["--topic", bundleID]
        }
        arguments += [
            "--latency-ms", "\(options.apnsLatencyMilliseconds)",
            "--latency-jitter-ms", "\(options.apnsLatencyJitterMilliseconds)",
        ]
        let process = try ChildProcess(
            name: "apns-sim", executable: options.executable, arguments: arguments,
            logFile: options.workDirectory + "/apns-sim.log"
        )
        let port = try await process.waitFor("its port") { () -> Int? in
            // The address of the line `APNs simulator listening on https://HOST:PORT`, once the line is whole.
            let output = process.output()
            guard let range = output.range(of: #"(?<=listening on https://)\S+(?=\n)"#, options: .regularExpression)
            else { return nil }
            return try? HostAndPort(parsing: String(output[range])).port
        }
        progress.finish("APNs simulator: pid \(process.pid), 127.0.0.1:\(port)")
        return Simulator(process: process, port: port, caFile: folder + "/ca.pem")
    }

    /// Starts `pushrelay serve` against the APNs simulator, and the FCM simulator when the run has one (its quota
    /// lifted as the tenants' rates are); returns once its ready file names its address.
    func startRelay(masterKeyFile: String, simulator: Simulator, fcm: FCMSimulator?) async throws -> Relay {
        let readyFile = options.workDirectory + "/relay.ready"
        try? FileManager.default.removeItem(atPath: readyFile)
        var arguments = [
            "serve", "--listen", "127.0.0.1:0", "--data-dir", options.workDirectory + "/pg", "--tenants", "",
            "--master-key-file", masterKeyFile, "--apns-endpoint", "127.0.0.1:\(simulator.port)", "--apns-ca",
            simulator.caFile, "--connections-per-pool", "\(options.apnsConnections)", "--requests-per-second",
            "1000000", "--request-burst", "1000000", "--max-recipients", "\(max(options.groupSize, 10_000))",
            "--metrics-listen", "", "--ready-file", readyFile, "--log-level", "warning",
        ]
        if let fcm {
            arguments += [
                "--fcm-endpoint", "127.0.0.1:\(fcm.port)", "--fcm-ca", fcm.caFile, "--fcm-messages-per-minute",
                "\(Self.unlimitedMessagesPerMinute)",
            ]
        }
        let process = try ChildProcess(
            name: "relay", executable: options.executable, arguments: arguments,
            logFile: options.workDirectory + "/relay.log"
        )
        let port = try await process.waitFor("ready") { () -> Int? in
            guard let text = try? String(contentsOfFile: readyFile, encoding: .utf8) else { return nil }
            // The relay's address is the first line.
            let address = text.split(separator: "\n").first ?? ""
            return try? HostAndPort(parsing: address.trimmingCharacters(in: .whitespaces)).port
        }
        progress.finish("relay: pid \(process.pid), 127.0.0.1:\(port)")
        return Relay(process: process, port: port)
    }

    func clientConfiguration(_ port: Int, _ tenant: RunTenant) -> PushRelayClientConfiguration {
        PushRelayClientConfiguration(
            host: "127.0.0.1", port: port, tenant: tenant.id, credential: tenant.credential, clientName: "loadtest",
            reconnect: false
        )
    }

    /// Reads the relay's RSS and CPU every 250 ms.
    func sample(pid: Int32) async {
        while !Task.isCancelled {
            if let reading = ProcessReading.read(pid: pid, at: now) {
                readings.withLock { $0.append(reading) }
            }
            try? await Task.sleep(for: .milliseconds(250))
        }
    }

    func readings(from start: Double, to end: Double) -> [ProcessReading] {
        readings.withLock { $0.filter { $0.t >= start && $0.t <= end } }
    }

    /// Runs `body` as a phase of the chart.
    func phase<T>(_ label: String, _ body: () async throws -> T) async throws -> T {
        let start = now
        let result = try await body()
        phases.withLock { $0.append(.init(label: label, start: start, end: now)) }
        return result
    }

    // MARK: Accounting and report

    func account(
        jobs: [(tenant: String, id: String, recipients: Int)],
        clients: [String: PushRelayClient]
    ) async throws -> LoadTestReport.Accounting {
        let rows = try await store.deliveryRowsByJob(since: started)
        var accounting = LoadTestReport.Accounting(
            accepted: 0, recorded: 0, jobs: jobs.count, jobsCompleted: 0, problems: [])
        for job in jobs {
            let status = try await waitForCompletion(jobID: job.id, client: clients[job.tenant]!, limit: .seconds(60))
            let recorded = rows[job.id] ?? 0
            accounting.accepted += job.recipients
            accounting.recorded += recorded
            if status.state == .completed { accounting.jobsCompleted += 1 }
            let counted = Int(status.delivered + status.failed + status.skipped)
            if status.state != .completed {
                accounting.problems.append("job \(job.id) of \(job.tenant) is \(status.state)")
            } else if recorded != job.recipients || counted != recorded {
                accounting.problems.append(
                    "job \(job.id) of \(job.tenant): \(job.recipients) accepted, \(recorded) rows, job status \(counted)"
                )
            }
        }
        let extra = rows.keys.filter { id in !jobs.contains { $0.id == id } }
        if !extra.isEmpty { accounting.problems.append("\(extra.count) jobs with rows that the run did not send") }
        return accounting
    }

    func timeline() async throws -> [LoadTestReport.TimelinePoint] {
        let origin = started.timeIntervalSince1970
        let samples = readings.withLock { $0 }
        return try await store.answeredSeconds(since: started).map { second in
            let t = Double(second.second) - origin
            let rss = samples.last { $0.t <= t + 1 }?.rssBytes
            return .init(
                t: max(t, 0), answered: second.answered, p50Milliseconds: second.p50Milliseconds,
                p99Milliseconds: second.p99Milliseconds, relayRSSMiB: rss.map { Double($0) / 1_048_576 }
            )
        }
    }

    func write(_ report: LoadTestReport) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.keyEncodingStrategy = .convertToSnakeCase
        let base = options.outputDirectory + "/loadtest-report"
        try encoder.encode(report).write(to: URL(fileURLWithPath: base + ".json"))
        try Data((report.text + "\n").utf8).write(to: URL(fileURLWithPath: base + ".txt"))
        let chart = ReportChart(
            timeline: report.timeline, rss: readings.withLock { $0 }, phases: phases.withLock { $0 },
            title: "pushrelay loadtest \(report.date): " + report.fanOuts.map { "\($0.size)" }.joined(separator: ", ")
                + " device fan-outs" + (report.fcmFanOut.map { ", FCM \($0.size)" } ?? "")
                + (report.mixedFanOut.map { ", mixed \($0.size)" } ?? "")
        )
        try Data(chart.svg().utf8).write(to: URL(fileURLWithPath: base + ".svg"))
    }

    // MARK: Helpers

    /// The alert every send carries (about 150 bytes of JSON with `aps`).
    static let payloadJSON =
        #"{"aps":{"alert":{"title":"Load test","body":"Hello from the pushrelay load test: a typical alert of about 150 bytes."},"sound":"default"}}"#

    static func send(tenant: RunTenant, body: String) -> Pushrelay_V1_Send {
        var send = Pushrelay_V1_Send()
        send.notificationType = tenant.notificationType
        send.alert.title = "Load test"
        send.alert.body = "Hello from the pushrelay load test: \(body)."
        send.sound = "default"
        // Values for the type's templates: thread-id and category (`circle-{circle_id}-...`), and its FCM
        // mapping's data, collapse key and tag (dispo's `event_id`).
        let type = tenant.configuration.notificationTypes[tenant.notificationType]
        let fcm = type?.fcm
        let templates =
            [type?.threadID, type?.category, fcm?.collapseKey, fcm?.tag] + (fcm?.data.values.map { $0 } ?? [])
        for template in templates.compactMap({ $0 }) {
            for name in template.split(separator: "{", omittingEmptySubsequences: false).dropFirst()
                .compactMap({ $0.split(separator: "}").first })
            {
                send.templateValues[String(name)] = "7"
            }
        }
        return send
    }

    static func machine() -> String {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model =
            cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }?.split(separator: ":").last?
            .trimmingCharacters(in: .whitespaces) ?? "unknown CPU"
        var name = utsname()
        uname(&name)
        let release = withUnsafeBytes(of: &name.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        return "\(ProcessInfo.processInfo.activeProcessorCount) CPUs, \(model), Linux \(release)"
    }
}
