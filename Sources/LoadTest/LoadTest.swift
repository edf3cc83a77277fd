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
public enum LoadTest {
    /// Runs the load test and writes its report; returns it. The report says whether every accepted
    /// notification was accounted for (``LoadTestReport/Accounting/consistent``).
    public static func run(_ options: LoadTestOptions) async throws -> LoadTestReport {
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
private final class LoadTestRun: Sendable {
    let options: LoadTestOptions
    let store: RelayStore
    let progress: ProgressLine
    let started = Date()
    let clock = ContinuousClock.now
    private let readings = Mutex<[ProcessReading]>([])
    private let phases = Mutex<[ReportChart.Phase]>([])

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
        let tenants = try await phase("setup") {
            try await TenantSetup(options: options, store: store, masterKey: masterKey, progress: progress).run()
        }
        let simulator = try await startSimulator(tenants)
        defer { simulator.process.stop(grace: .seconds(10)) }
        let relay = try await startRelay(masterKeyFile: masterKeyFile, simulator: simulator)
        defer { relay.process.stop() }
        let sampler = Task { await self.sample(pid: relay.process.pid) }
        defer { sampler.cancel() }

        let group = MultiThreadedEventLoopGroup.singleton
        var clients: [String: PushRelayClient] = [:]
        for tenant in tenants {
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
                tenants: tenants.map { .init(id: $0.id, devices: $0.devices, notificationType: $0.notificationType) },
                tenantChanges:
                    "notifications_per_second \(options.notificationsPerSecond); topic \(RunTenant.topic) added; "
                    + "quiet hours dropped where no alert type passes them"
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
            let count = size <= LoadTestOptions.shortFanOutLimit ? options.shortFanOutRuns : 1
            var runs: [LoadTestReport.FanOut] = []
            for run in 1...count {
                let fanOut = try await phase(count > 1 ? "fan-out \(size) (\(run)/\(count))" : "fan-out \(size)") {
                    try await runFanOut(size: size, tenant: tenant, client: clients[tenant.id]!, pid: relay.process.pid)
                }
                runs.append(fanOut)
                jobs.append((tenant.id, fanOut.jobID, size))
            }
            // The run of median time (the later of the two middle ones for an even count).
            var fanOut = runs.sorted { $0.seconds < $1.seconds }[runs.count / 2]
            if count > 1 {
                fanOut.runs = runs.map { run in
                    .init(
                        jobID: run.jobID, seconds: run.seconds, notificationsPerSecond: run.notificationsPerSecond,
                        rows: run.rows, rateOverEngine: engineRate.map { run.notificationsPerSecond / $0 })
                }
            }
            if let previous = report.fanOuts.last {
                fanOut.timeRatioToPrevious = fanOut.seconds / max(previous.seconds, 0.001)
                fanOut.sizeRatioToPrevious = Double(fanOut.size) / Double(previous.size)
            }
            if let engineRate {
                fanOut.rateOverEngine = fanOut.notificationsPerSecond / engineRate
            }
            report.fanOuts.append(fanOut)
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

    private struct Simulator {
        let process: ChildProcess
        let port: Int
        let caFile: String
    }

    private struct Relay {
        let process: ChildProcess
        let port: Int
    }

    private func startSimulator(_ tenants: [RunTenant]) async throws -> Simulator {
        let folder = options.workDirectory + "/sim"
        var arguments = ["apns-sim", "--host", "127.0.0.1", "--port", "0", "--cert-dir", folder]
        for tenant in tenants {
            arguments += ["--key", "\(tenant.keyID):\(tenant.teamID):\(tenant.keyFile)"]
        }
        for bundleID in Set(tenants.flatMap { $0.configuration.bundleIDs.keys }).sorted() {
            arguments += ["--topic", bundleID]
        }
        let process = try ChildProcess(
            name: "apns-sim", executable: options.executable, arguments: arguments,
            logFile: options.workDirectory + "/apns-sim.log"
        )
        let port = try await process.waitFor("its port") { () -> Int? in
            guard
                let range = process.output().range(
                    of: #"listening on https://[^ ]+:[0-9]+"#, options: .regularExpression)
            else { return nil }
            return Int(process.output()[range].split(separator: ":").last ?? "")
        }
        progress.finish("APNs simulator: pid \(process.pid), 127.0.0.1:\(port)")
        return Simulator(process: process, port: port, caFile: folder + "/ca.pem")
    }

    private func startRelay(masterKeyFile: String, simulator: Simulator) async throws -> Relay {
        let readyFile = options.workDirectory + "/relay.ready"
        try? FileManager.default.removeItem(atPath: readyFile)
        let arguments = [
            "serve", "--listen", "127.0.0.1:0", "--data-dir", options.workDirectory + "/pg", "--tenants", "",
            "--master-key-file", masterKeyFile, "--apns-endpoint", "127.0.0.1:\(simulator.port)", "--apns-ca",
            simulator.caFile, "--connections-per-pool", "\(options.apnsConnections)", "--requests-per-second",
            "1000000", "--request-burst", "1000000", "--max-recipients", "\(max(options.groupSize, 10_000))",
            "--metrics-listen", "", "--ready-file", readyFile, "--log-level", "warning",
        ]
        let process = try ChildProcess(
            name: "relay", executable: options.executable, arguments: arguments,
            logFile: options.workDirectory + "/relay.log"
        )
        let port = try await process.waitFor("ready") { () -> Int? in
            guard let text = try? String(contentsOfFile: readyFile, encoding: .utf8) else { return nil }
            // The relay's address is the first line.
            let address = text.split(separator: "\n").first ?? ""
            return Int(address.trimmingCharacters(in: .whitespaces).split(separator: ":").last ?? "")
        }
        progress.finish("relay: pid \(process.pid), 127.0.0.1:\(port)")
        return Relay(process: process, port: port)
    }

    private func clientConfiguration(_ port: Int, _ tenant: RunTenant) -> PushRelayClientConfiguration {
        PushRelayClientConfiguration(
            host: "127.0.0.1", port: port, tenant: tenant.id, credential: tenant.credential, clientName: "loadtest",
            reconnect: false
        )
    }

    /// Reads the relay's RSS and CPU every 250 ms.
    private func sample(pid: Int32) async {
        while !Task.isCancelled {
            if let reading = ProcessReading.read(pid: pid, at: now) {
                readings.withLock { $0.append(reading) }
            }
            try? await Task.sleep(for: .milliseconds(250))
        }
    }

    private func readings(from start: Double, to end: Double) -> [ProcessReading] {
        readings.withLock { $0.filter { $0.t >= start && $0.t <= end } }
    }

    /// Runs `body` as a phase of the chart.
    private func phase<T>(_ label: String, _ body: () async throws -> T) async throws -> T {
        let start = now
        let result = try await body()
        phases.withLock { $0.append(.init(label: label, start: start, end: now)) }
        return result
    }

    // MARK: Phases

    private func engineBaseline(tenant: RunTenant, simulator: Simulator) async throws -> LoadTestReport.EngineBaseline {
        let tokensFile = options.workDirectory + "/baseline-tokens.txt"
        let tokens = (0..<min(tenant.devices, 10_000)).map {
            RelayStore.syntheticToken(prefix: tenant.tokenPrefix, index: $0)
        }
        try Data((tokens.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: tokensFile))
        progress.finish("engine alone: pushrelay apns push, \(options.baselineCount) notifications ...")
        let process = try ChildProcess(
            name: "apns push", executable: options.executable,
            arguments: [
                "apns", "push", "--endpoint", "127.0.0.1:\(simulator.port)", "--ca-file", simulator.caFile, "--p8",
                tenant.keyFile, "--key-id", tenant.keyID, "--team-id", tenant.teamID, "--topic", tenant.bundleID,
                "--tokens-file", tokensFile, "--payload", Self.payloadJSON, "--count", "\(options.baselineCount)",
                "--concurrency", "1000", "--connections", "\(options.apnsConnections)",
            ],
            logFile: options.workDirectory + "/baseline.log"
        )
        _ = try await process.waitForExit(limit: .seconds(1800))
        let output = process.output()
        func number(after label: String) -> Double? {
            for line in output.split(separator: "\n") where line.hasPrefix(label) {
                return Double(line.dropFirst(label.count).trimmingCharacters(in: .whitespaces))
            }
            return nil
        }
        guard let rate = number(after: "notifications/s:") else {
            throw LoadTestError("pushrelay apns push printed no rate:\n\(process.lastLines())")
        }
        let delivered = Int(number(after: "delivered") ?? 0)
        progress.finish(
            "engine alone: \(Int(rate))/s, \(delivered)/\(options.baselineCount) delivered"
        )
        return .init(count: options.baselineCount, delivered: delivered, notificationsPerSecond: rate)
    }

    private func idleConnections(
        port: Int,
        tenant: RunTenant,
        pid: Int32,
        group: any EventLoopGroup
    ) async throws -> LoadTestReport.IdleConnections {
        try await Task.sleep(for: .seconds(1))
        let before = ProcessReading.read(pid: pid, at: now)?.rssBytes ?? 0
        var clients: [PushRelayClient] = []
        let started = ContinuousClock.now
        for index in 0..<options.idleConnections {
            let client = PushRelayClient(configuration: clientConfiguration(port, tenant), group: group)
            try await client.connect()
            clients.append(client)
            if index % 50 == 49 {
                let elapsed = (ContinuousClock.now - started).seconds
                progress.update(
                    phase: "idle connections", done: index + 1, total: options.idleConnections,
                    rate: Double(index + 1) / max(elapsed, 0.001), elapsed: elapsed
                )
            }
        }
        try await Task.sleep(for: .seconds(2))
        let after = ProcessReading.read(pid: pid, at: now)?.rssBytes ?? 0
        for client in clients { await client.close() }
        let result = LoadTestReport.IdleConnections(
            count: options.idleConnections, rssBeforeMiB: Double(before) / 1_048_576,
            rssAfterMiB: Double(after) / 1_048_576,
            kibPerConnection: Double(after - before) / 1024 / Double(options.idleConnections)
        )
        progress.finish(
            "idle connections: \(result.count) open, relay RSS \(String(format: "%.1f", result.rssBeforeMiB)) -> "
                + "\(String(format: "%.1f", result.rssAfterMiB)) MiB, "
                + "\(String(format: "%.1f", result.kibPerConnection)) KiB each"
        )
        return result
    }

    private func singleSends(
        tenants: [RunTenant],
        clients: [String: PushRelayClient],
        port: Int,
        group: any EventLoopGroup
    ) async throws -> (LoadTestReport.Singles, [(tenant: String, id: String, recipients: Int)]) {
        // A receipts stream per tenant, on its own connection, gives the time APNs answered each send.
        let receipts = ReceiptBoard()
        var listeners: [PushRelayClient] = []
        var readers: [Task<Void, Never>] = []
        for tenant in tenants {
            let listener = PushRelayClient(configuration: clientConfiguration(port, tenant), group: group)
            let stream = try await listener.subscribeResults(receipts: true)
            listeners.append(listener)
            readers.append(
                Task {
                    for await event in stream {
                        if case .receipt(let delivery)? = event.event {
                            receipts.note(jobID: delivery.jobID, at: ContinuousClock.now)
                        }
                    }
                }
            )
        }
        // One send at a time, the tenants' connections in turn: each starts when APNs has answered the one
        // before (its receipt came), or after 10 s without a receipt (it was not delivered).
        let total = options.singles
        let started = ContinuousClock.now
        var sends: [(tenant: String, id: String, sent: ContinuousClock.Instant, ack: Double)] = []
        for number in 0..<total {
            let tenant = tenants[number % tenants.count]
            var send = Self.send(tenant: tenant, body: "single \(number)")
            send.userIds = [RunTenant.user(number / tenants.count)]
            let sent = ContinuousClock.now
            let answer = try await clients[tenant.id]!.send(send)
            sends.append((tenant.id, answer.jobID, sent, (ContinuousClock.now - sent).seconds * 1000))
            await receipts.wait(for: answer.jobID, limit: .seconds(10), on: group.next())
            if (number + 1) % 100 == 0 {
                let elapsed = (ContinuousClock.now - started).seconds
                progress.update(
                    phase: "single sends", done: number + 1, total: total, rate: Double(number + 1) / elapsed,
                    elapsed: elapsed
                )
            }
        }
        for listener in listeners { await listener.close() }
        for reader in readers { reader.cancel() }
        let answered = receipts.answered
        var apns: [Double] = []
        for send in sends {
            if let at = answered[send.id] { apns.append((at - send.sent).seconds * 1000) }
        }
        let result = LoadTestReport.Singles(
            count: sends.count, ackMilliseconds: .init(sends.map(\.ack)), apnsMilliseconds: .init(apns),
            withoutReceipt: sends.count - apns.count
        )
        progress.finish(
            "single sends: \(result.count); ack p50 \(String(format: "%.2f", result.ackMilliseconds.p50)) ms, p99 "
                + "\(String(format: "%.2f", result.ackMilliseconds.p99)) ms; APNs answer p50 "
                + "\(String(format: "%.2f", result.apnsMilliseconds.p50)) ms, p99 "
                + "\(String(format: "%.2f", result.apnsMilliseconds.p99)) ms"
        )
        return (result, sends.map { ($0.tenant, $0.id, 1) })
    }

    private func groupSends(
        tenants: [RunTenant],
        clients: [String: PushRelayClient]
    ) async throws -> (LoadTestReport.Groups, [(tenant: String, id: String, recipients: Int)]) {
        let total = options.groups
        let size = options.groupSize
        let perTenant = (total + tenants.count - 1) / tenants.count
        let firstUser = (options.singles + tenants.count - 1) / tenants.count
        let started = ContinuousClock.now
        let done = Counter()
        let sends = try await withThrowingTaskGroup(of: [(tenant: String, id: String, ack: Double)].self) { group in
            for (index, tenant) in tenants.enumerated() {
                let count = max(0, min(perTenant, total - index * perTenant))
                let client = clients[tenant.id]!
                group.addTask {
                    var sends: [(tenant: String, id: String, ack: Double)] = []
                    for number in 0..<count {
                        var send = Self.send(tenant: tenant, body: "group \(number)")
                        // Users after the single sends' users, so no per-user cap mixes the two.
                        send.userIds = (0..<size).map { RunTenant.user(firstUser + number * size + $0) }
                        let sent = ContinuousClock.now
                        let answer = try await client.send(send)
                        sends.append((tenant.id, answer.jobID, (ContinuousClock.now - sent).seconds * 1000))
                        let finished = done.increment()
                        if finished % 20 == 0 {
                            let elapsed = (ContinuousClock.now - started).seconds
                            self.progress.update(
                                phase: "group sends", done: finished, total: total, rate: Double(finished) / elapsed,
                                elapsed: elapsed
                            )
                        }
                    }
                    return sends
                }
            }
            var all: [(tenant: String, id: String, ack: Double)] = []
            for try await part in group { all += part }
            return all
        }
        for send in sends {
            _ = try await waitForCompletion(jobID: send.id, client: clients[send.tenant]!, limit: .seconds(120))
        }
        let seconds = (ContinuousClock.now - started).seconds
        let result = LoadTestReport.Groups(
            count: sends.count, recipients: sends.count * size, ackMilliseconds: .init(sends.map(\.ack)),
            seconds: seconds
        )
        progress.finish(
            "group sends: \(result.count) x \(size) users, completed in \(String(format: "%.1f", seconds)) s; ack p99 "
                + "\(String(format: "%.2f", result.ackMilliseconds.p99)) ms"
        )
        return (result, sends.map { ($0.tenant, $0.id, size) })
    }

    private func runFanOut(
        size: Int,
        tenant: RunTenant,
        client: PushRelayClient,
        pid: Int32
    ) async throws -> LoadTestReport.FanOut {
        let startT = now
        // The relay's CPU is read at both ends: a 10,000 fan-out takes less than the 250 ms between samples.
        let before = ProcessReading.read(pid: pid, at: startT)
        var send = Self.send(tenant: tenant, body: "fan-out of \(size)")
        send.topic = tenant.fanOutTopic
        let sentAt = Date()
        let sent = ContinuousClock.now
        let answer = try await client.send(send)
        let ack = (ContinuousClock.now - sent).seconds * 1000
        var job = answer.job
        // The job's state is asked every 25 ms; the progress line, a heavier query, every 500 ms. The time measured
        // ends at the job's `finished_at_ms` as the relay answers it (its rows all recorded; the relay runs on
        // this machine, with this clock), not when the next poll happens to see it.
        var lastProgress = sent
        while job.state != .completed {
            guard job.state != .failed, job.state != .cancelled else {
                throw LoadTestError("fan-out job \(answer.jobID) ended \(job.state): \(job.error)")
            }
            try await Task.sleep(for: .milliseconds(25))
            let elapsed = (ContinuousClock.now - sent).seconds
            if ContinuousClock.now - lastProgress >= .milliseconds(500) {
                lastProgress = ContinuousClock.now
                let (planned, recorded) = try await store.jobPageProgress(jobID: answer.jobID)
                progress.update(
                    phase: "fan-out \(size) (\(tenant.id))", done: recorded, total: size,
                    rate: Double(recorded) / max(elapsed, 0.001), elapsed: elapsed,
                    note: planned < size ? "planned \(planned)" : ""
                )
                guard elapsed < Double(max(600, size / 200)) else {
                    throw LoadTestError(
                        "fan-out of \(size) not complete after \(Int(elapsed)) s (\(recorded) recorded)")
                }
            }
            job = try await client.jobStatus(jobID: answer.jobID)
        }
        let polled = (ContinuousClock.now - sent).seconds
        let finished = Date(timeIntervalSince1970: Double(job.finishedAtMs) / 1000).timeIntervalSince(sentAt)
        let seconds = job.finishedAtMs > 0 && finished > 0 && finished <= polled ? finished : polled
        let endT = now
        let after = ProcessReading.read(pid: pid, at: endT)
        let window = readings(from: startT, to: endT + 0.3) + [before, after].compactMap { $0 }
        let cpu = (after?.cpuSeconds ?? 0) - (before?.cpuSeconds ?? 0)
        let rows = try await store.deliveryRowsByJob(since: started)[answer.jobID] ?? 0
        let rowsWritten = try await store.jobAndPageRows(jobID: answer.jobID) + rows
        let span = try await store.deliveryTimespan(jobID: answer.jobID)
        let result = LoadTestReport.FanOut(
            size: size, tenant: tenant.id, jobID: answer.jobID, ackMilliseconds: ack, seconds: seconds,
            firstSendMilliseconds: span.firstSent.map { $0.timeIntervalSince(sentAt) * 1000 },
            lastAnswerToCompletionMilliseconds: span.lastAnswered.map {
                seconds * 1000 - $0.timeIntervalSince(sentAt) * 1000
            },
            notificationsPerSecond: Double(size) / seconds, delivered: Int(job.delivered), failed: Int(job.failed),
            skipped: Int(job.skipped), rows: rows, relayCPUSeconds: cpu,
            relayCPUSecondsPer100k: cpu / Double(size) * 100_000,
            relayPeakRSSMiB: Double(window.map(\.rssBytes).max() ?? 0) / 1_048_576,
            postgresRowsPerSecond: Double(rowsWritten) / seconds,
            deliveryRowsPerSecond: Double(rows) / seconds
        )
        progress.finish(
            "fan-out \(size) (\(tenant.id)): \(String(format: "%.2f", seconds)) s, "
                + "\(Int(result.notificationsPerSecond)) notifications/s, delivered \(result.delivered), failed "
                + "\(result.failed), skipped \(result.skipped), \(rows) rows; relay CPU "
                + "\(String(format: "%.2f", result.relayCPUSecondsPer100k)) s/100k, peak RSS "
                + "\(String(format: "%.1f", result.relayPeakRSSMiB)) MiB"
        )
        return result
    }

    private func waitForCompletion(
        jobID: String,
        client: PushRelayClient,
        limit: Duration
    ) async throws -> Pushrelay_V1_Job {
        let deadline = ContinuousClock.now + limit
        while true {
            let job = try await client.jobStatus(jobID: jobID)
            if job.state == .completed || job.state == .failed || job.state == .cancelled
                || ContinuousClock.now > deadline
            {
                return job
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    // MARK: Accounting and report

    private func account(
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

    private func timeline() async throws -> [LoadTestReport.TimelinePoint] {
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

    private func write(_ report: LoadTestReport) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.keyEncodingStrategy = .convertToSnakeCase
        let base = options.outputDirectory + "/loadtest-report"
        try encoder.encode(report).write(to: URL(fileURLWithPath: base + ".json"))
        try Data((report.text + "\n").utf8).write(to: URL(fileURLWithPath: base + ".txt"))
        let chart = ReportChart(
            timeline: report.timeline, rss: readings.withLock { $0 }, phases: phases.withLock { $0 },
            title: "pushrelay loadtest \(report.date): " + report.fanOuts.map { "\($0.size)" }.joined(separator: ", ")
                + " device fan-outs"
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
        // Values for the type's thread-id and category templates (`circle-{circle_id}-...`).
        let type = tenant.configuration.notificationTypes[tenant.notificationType]
        for template in [type?.threadID, type?.category].compactMap({ $0 }) {
            for name in template.split(separator: "{").dropFirst().compactMap({ $0.split(separator: "}").first }) {
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

/// A count shared by tasks.
private final class Counter: Sendable {
    private let value = Atomic<Int>(0)

    /// Adds one; returns the new count.
    func increment() -> Int { value.add(1, ordering: .relaxed).newValue }
}

/// When APNs answered each single send (its receipt's arrival), and the send waiting for its receipt: the
/// waiting send is woken by the receipt instead of polling for it, so the load generator takes no CPU from the
/// relay and PostgreSQL between sends.
private final class ReceiptBoard: Sendable {
    private struct State {
        var answered: [String: ContinuousClock.Instant] = [:]
        var waiter: (jobID: String, continuation: CheckedContinuation<Void, Never>)?
        /// The job whose wait ran out before its send began waiting.
        var expired: String?
    }

    private let state = Mutex(State())

    /// The latest receipt's time of each job.
    var answered: [String: ContinuousClock.Instant] { state.withLock { $0.answered } }

    /// Notes a receipt of job `jobID` at `instant`; wakes the send waiting for it.
    func note(jobID: String, at instant: ContinuousClock.Instant) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.answered[jobID] = instant
            return Self.takeWaiter(of: jobID, from: &state)
        }
        waiter?.resume()
    }

    /// Returns once job `jobID` has a receipt, or after `limit` without one (a timer on `eventLoop`). One send
    /// waits at a time.
    func wait(for jobID: String, limit: TimeAmount, on eventLoop: any EventLoop) async {
        let timer = eventLoop.scheduleTask(in: limit) {
            let waiter = self.state.withLock { state -> CheckedContinuation<Void, Never>? in
                guard let waiter = Self.takeWaiter(of: jobID, from: &state) else {
                    state.expired = jobID
                    return nil
                }
                return waiter
            }
            waiter?.resume()
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                guard state.answered[jobID] == nil, state.expired != jobID else { return true }
                state.waiter = (jobID, continuation)
                return false
            }
            if done { continuation.resume() }
        }
        timer.cancel()
    }

    private static func takeWaiter(of jobID: String, from state: inout State) -> CheckedContinuation<Void, Never>? {
        guard let waiter = state.waiter, waiter.jobID == jobID else { return nil }
        state.waiter = nil
        return waiter.continuation
    }
}
