import EmbeddedPostgres
import Foundation
import Logging
import NIOCore
import NIOPosix
import PushRelayClient
import PushRelayProtocol
import RelayStore
import Synchronization

/// The phases of a run, each measured on its own.
extension LoadTestRun {
    func engineBaseline(tenant: RunTenant, simulator: Simulator) async throws -> LoadTestReport.EngineBaseline {
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

    func idleConnections(
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

    func singleSends(
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

    func groupSends(
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

    func waitForCompletion(
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
}
