import Foundation
import PushRelayClient
import PushRelayProtocol

/// Fan-outs: one send to a whole topic, measured; a short one several times, its run of median time reported.
extension LoadTestRun {
    /// A fan-out of `size` devices of `tenant`'s `topic`, run ``LoadTestOptions/shortFanOutRuns`` times when it
    /// is short (at most ``LoadTestOptions/shortFanOutLimit`` devices), else once: the run of median time (the
    /// later of the two middle ones for an even count) with every run's figures, its rate over `engineRate` when
    /// given, and every run's job for the accounting.
    func measureFanOut(
        size: Int, tenant: RunTenant, topic: String, label: String, client: PushRelayClient, pid: Int32,
        engineRate: Double?
    ) async throws -> (fanOut: LoadTestReport.FanOut, jobs: [(tenant: String, id: String, recipients: Int)]) {
        let count = size <= LoadTestOptions.shortFanOutLimit ? options.shortFanOutRuns : 1
        var runs: [LoadTestReport.FanOut] = []
        for run in 1...count {
            let fanOut = try await phase(count > 1 ? "\(label) (\(run)/\(count))" : label) {
                try await runFanOut(size: size, tenant: tenant, topic: topic, label: label, client: client, pid: pid)
            }
            runs.append(fanOut)
        }
        var fanOut = runs.sorted { $0.seconds < $1.seconds }[runs.count / 2]
        if count > 1 {
            fanOut.runs = runs.map { run in
                .init(
                    jobID: run.jobID, seconds: run.seconds, notificationsPerSecond: run.notificationsPerSecond,
                    rows: run.rows, rateOverEngine: engineRate.map { run.notificationsPerSecond / $0 })
            }
        }
        if let engineRate {
            fanOut.rateOverEngine = fanOut.notificationsPerSecond / engineRate
        }
        return (fanOut, runs.map { (tenant.id, $0.jobID, size) })
    }

    /// One fan-out of `size` devices: a send of `tenant` to `topic`, timed to the job's completion, with the
    /// relay's CPU and memory over it and the rows it wrote; `label` names it in the progress lines.
    func runFanOut(
        size: Int,
        tenant: RunTenant,
        topic: String,
        label: String,
        client: PushRelayClient,
        pid: Int32
    ) async throws -> LoadTestReport.FanOut {
        let startT = now
        // The relay's CPU is read at both ends: a 10,000 fan-out takes less than the 250 ms between samples.
        let before = ProcessReading.read(pid: pid, at: startT)
        var send = Self.send(tenant: tenant, body: "fan-out of \(size)")
        send.topic = topic
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
                    phase: "\(label) (\(tenant.id))", done: recorded, total: size,
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
            "\(label) (\(tenant.id)): \(String(format: "%.2f", seconds)) s, "
                + "\(Int(result.notificationsPerSecond)) notifications/s, delivered \(result.delivered), failed "
                + "\(result.failed), skipped \(result.skipped), \(rows) rows; relay CPU "
                + "\(String(format: "%.2f", result.relayCPUSecondsPer100k)) s/100k, peak RSS "
                + "\(String(format: "%.1f", result.relayPeakRSSMiB)) MiB"
        )
        return result
    }
}
