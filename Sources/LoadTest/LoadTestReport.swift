import Foundation

/// Everything a load test measured; written as JSON (`report.json`) and printed as text.
package struct LoadTestReport: Codable, Sendable {
    /// When the run started (UTC, ISO 8601).
    package var date: String
    /// The machine: CPUs, model, kernel.
    package var machine: String
    /// What was asked of the run.
    package var configuration: Configuration
    /// `pushrelay apns push` alone against the same APNs endpoint, in the same run.
    package var engineBaseline: EngineBaseline?
    /// Single sends (one user, one device) and their latency.
    package var singles: Singles?
    /// Small group sends (a few users each).
    package var groups: Groups?
    /// Fan-outs to a whole topic, smallest first.
    package var fanOuts: [FanOut]
    /// The FCM fan-out (`--fcm-fan-out`): a topic of FCM devices only, of the FCM tenant.
    package var fcmFanOut: FanOut?
    /// The mixed fan-out (`--mixed-fan-out`): a topic of the FCM tenant, half APNs and half FCM devices.
    package var mixedFanOut: FanOut?
    /// Idle backend connections and what they cost the relay.
    package var idleConnections: IdleConnections?
    /// Whole-run figures of the relay process.
    package var relay: RelayFigures
    /// Delivery rows of the run by outcome and reason.
    package var outcomes: [Outcome]
    /// Accepted versus recorded, per phase and in all.
    package var accounting: Accounting
    /// Second-by-second figures (the chart's data).
    package var timeline: [TimelinePoint]

    /// The run's settings.
    package struct Configuration: Codable, Sendable {
        /// Fan-out sizes, in devices.
        package var fanOutSizes: [Int]
        /// Times each fan-out of at most 10,000 devices ran.
        package var shortFanOutRuns: Int
        /// Single sends.
        package var singles: Int
        /// Group sends and users per group.
        package var groups: Int
        /// Users in each group send.
        package var groupSize: Int
        /// Backend connections driving singles and groups (one per tenant each).
        package var backendConnections: Int
        /// Idle connections opened.
        package var idleConnections: Int
        /// Notifications the engine baseline sends.
        package var baselineCount: Int
        /// HTTP/2 connections per APNs pool, for the relay and the baseline.
        package var apnsConnections: Int
        /// Milliseconds the APNs simulator waited before each answer, and up to how many more (absent in
        /// reports made before the option: 0).
        package var apnsLatencyMilliseconds: Int?
        /// Up to how many milliseconds more it waited, drawn for each answer.
        package var apnsLatencyJitterMilliseconds: Int?
        /// The tenants, with the device count and the notification type each got.
        package var tenants: [Tenant]
        /// How the tenant files were changed for the run.
        package var tenantChanges: String
        /// Devices of the FCM fan-out, 0 for none (absent in reports made before the option).
        package var fcmFanOut: Int?
        /// Devices of the mixed fan-out, 0 for none.
        package var mixedFanOut: Int?
        /// The tenant of the FCM and mixed fan-outs, when the run had one.
        package var fcmTenant: String?
        /// Milliseconds the FCM simulator waited before each answer.
        package var fcmLatencyMilliseconds: Int?
        /// Up to how many milliseconds more it waited, drawn for each answer.
        package var fcmLatencyJitterMilliseconds: Int?
    }

    /// A tenant of the run.
    package struct Tenant: Codable, Sendable {
        /// Tenant id.
        package var id: String
        /// Synthetic devices registered.
        package var devices: Int
        /// The notification type every send of this tenant uses.
        package var notificationType: String
    }

    /// The engine alone.
    package struct EngineBaseline: Codable, Sendable {
        /// Notifications sent.
        package var count: Int
        /// Delivered of those.
        package var delivered: Int
        /// What `pushrelay apns push` reported.
        package var notificationsPerSecond: Double
    }

    /// Latency percentiles, milliseconds.
    package struct Latency: Codable, Sendable, Hashable {
        /// Samples.
        package var count: Int
        /// Median.
        package var p50: Double
        /// 99th percentile.
        package var p99: Double
        /// 99.9th percentile.
        package var p999: Double
        /// Largest.
        package var max: Double

        /// Percentiles of `samples` (nearest rank); zeros when there are none.
        package init(_ samples: [Double]) {
            let sorted = samples.sorted()
            func rank(_ q: Double) -> Double {
                guard !sorted.isEmpty else { return 0 }
                let index = Int((q * Double(sorted.count)).rounded(.up)) - 1
                return sorted[Swift.min(Swift.max(index, 0), sorted.count - 1)]
            }
            count = sorted.count
            p50 = rank(0.5)
            p99 = rank(0.99)
            p999 = rank(0.999)
            max = sorted.last ?? 0
        }
    }

    /// Single sends.
    package struct Singles: Codable, Sendable {
        /// Sends made (and acknowledged).
        package var count: Int
        /// Request to the relay's answer (the job committed).
        package var ackMilliseconds: Latency
        /// Request to the delivery receipt (APNs answered), for the sends that got one.
        package var apnsMilliseconds: Latency
        /// Sends without a receipt (not delivered, or the receipt did not come).
        package var withoutReceipt: Int
    }

    /// Group sends.
    package struct Groups: Codable, Sendable {
        /// Sends made.
        package var count: Int
        /// Recipients in all.
        package var recipients: Int
        /// Request to the relay's answer.
        package var ackMilliseconds: Latency
        /// Seconds from the first send to the last group's last delivery recorded.
        package var seconds: Double
    }

    /// One fan-out.
    package struct FanOut: Codable, Sendable {
        /// Devices in the topic.
        package var size: Int
        /// Tenant that sent it.
        package var tenant: String
        /// Job id.
        package var jobID: String
        /// Request to the relay's answer, milliseconds.
        package var ackMilliseconds: Double
        /// Request to the job completed (every delivery recorded), seconds.
        package var seconds: Double
        /// Request to the first send to APNs (the earliest `sent_at` of the job's rows), milliseconds: planning the
        /// first page and reading its recipients' policy state.
        package var firstSendMilliseconds: Double?
        /// The last APNs answer (the latest `answered_at` of the job's rows) to the job completed, milliseconds:
        /// writing the last rows and completing the pages and the job.
        package var lastAnswerToCompletionMilliseconds: Double?
        /// `size / seconds`: accepted, answered by APNs and recorded.
        package var notificationsPerSecond: Double
        /// Delivered, failed, skipped as the job reports them (JOB_STATUS).
        package var delivered: Int
        /// Failed (job status).
        package var failed: Int
        /// Skipped by policy (job status).
        package var skipped: Int
        /// Delivery rows of the job in PostgreSQL.
        package var rows: Int
        /// Relay CPU seconds over the fan-out.
        package var relayCPUSeconds: Double
        /// The same per 100,000 notifications.
        package var relayCPUSecondsPer100k: Double
        /// Largest relay RSS seen during the fan-out, MiB.
        package var relayPeakRSSMiB: Double
        /// Rows the fan-out inserted into PostgreSQL per second: its job, its pages and its delivery rows.
        package var postgresRowsPerSecond: Double
        /// Delivery rows per second over the fan-out.
        package var deliveryRowsPerSecond: Double
        /// This fan-out's time over the previous (smaller) one's, and their sizes' ratio.
        package var timeRatioToPrevious: Double?
        /// Size over the previous size.
        package var sizeRatioToPrevious: Double?
        /// This fan-out's rate over the engine baseline's.
        package var rateOverEngine: Double?
        /// Every run of this size, in the order they ran, when it ran more than once (a short fan-out); the
        /// figures above are those of the run of median time.
        package var runs: [FanOutRun]?
        /// The FCM devices among ``size`` (the FCM and mixed fan-outs; the rest are APNs devices).
        package var fcmDevices: Int?
        /// Its relay CPU per 100,000 notifications over that of the APNs fan-out of the same size in the run (the
        /// FCM and mixed fan-outs, when the run had one; FCM's target: at most 1.5 at 1,000,000).
        package var apnsCPURatio: Double?
    }

    /// One run of a fan-out size that ran several times.
    package struct FanOutRun: Codable, Sendable {
        /// Its job.
        package var jobID: String
        /// Request to the job completed, seconds.
        package var seconds: Double
        /// Devices over seconds.
        package var notificationsPerSecond: Double
        /// Its delivery rows.
        package var rows: Int
        /// Its rate over the engine baseline's.
        package var rateOverEngine: Double?
    }

    /// Idle connections.
    package struct IdleConnections: Codable, Sendable {
        /// Connections opened (HELLO done) and left idle.
        package var count: Int
        /// Relay RSS before, MiB.
        package var rssBeforeMiB: Double
        /// Relay RSS with them open, MiB.
        package var rssAfterMiB: Double
        /// `(after - before) / count`, KiB.
        package var kibPerConnection: Double
    }

    /// The relay over the whole run.
    package struct RelayFigures: Codable, Sendable {
        /// Peak RSS (VmHWM), MiB.
        package var peakRSSMiB: Double
        /// CPU seconds.
        package var cpuSeconds: Double
    }

    /// Delivery rows of one outcome and reason.
    package struct Outcome: Codable, Sendable {
        /// delivered, token_dead, retry_later, configuration_fault or skipped.
        package var outcome: String
        /// APNs reason or skip reason, `""` for none.
        package var reason: String
        /// Rows.
        package var rows: Int
    }

    /// Accepted versus recorded.
    package struct Accounting: Codable, Sendable {
        /// Notifications accepted (one per device or recipient of every acknowledged send).
        package var accepted: Int
        /// Delivery rows recorded for those sends.
        package var recorded: Int
        /// Jobs acknowledged.
        package var jobs: Int
        /// Jobs that completed.
        package var jobsCompleted: Int
        /// What does not add up; empty when everything accepted is accounted for.
        package var problems: [String]

        /// Whether every accepted notification has its row and every job completed.
        package var consistent: Bool { problems.isEmpty && accepted == recorded && jobs == jobsCompleted }
    }

    /// One second of the run.
    package struct TimelinePoint: Codable, Sendable {
        /// Seconds since the run started.
        package var t: Double
        /// Deliveries APNs answered in this second (from `answered_at`).
        package var answered: Int
        /// Median APNs latency of those, milliseconds.
        package var p50Milliseconds: Double
        /// 99th percentile of the same.
        package var p99Milliseconds: Double
        /// Relay RSS at that second, MiB (last reading).
        package var relayRSSMiB: Double?
    }
}

extension LoadTestReport {
    /// The report as people read it.
    package var text: String {
        var lines: [String] = []
        func f(_ value: Double, _ digits: Int = 0) -> String { String(format: "%.\(digits)f", value) }
        lines.append("# pushrelay load test, \(date)")
        lines.append("machine: \(machine)")
        lines.append(
            "APNs round trip (simulator): \(configuration.apnsLatencyMilliseconds ?? 0) ms"
                + ((configuration.apnsLatencyJitterMilliseconds ?? 0) > 0
                    ? " + up to \(configuration.apnsLatencyJitterMilliseconds ?? 0) ms jitter" : ""))
        lines.append(
            "tenants: "
                + configuration.tenants.map { "\($0.id) \($0.devices) devices (\($0.notificationType))" }
                .joined(separator: ", ")
        )
        if let fcmTenant = configuration.fcmTenant {
            lines.append(
                "FCM round trip (simulator): \(configuration.fcmLatencyMilliseconds ?? 0) ms"
                    + ((configuration.fcmLatencyJitterMilliseconds ?? 0) > 0
                        ? " + up to \(configuration.fcmLatencyJitterMilliseconds ?? 0) ms jitter" : "")
                    + "; FCM and mixed fan-outs of \(fcmTenant)")
        }
        lines.append("tenant files: \(configuration.tenantChanges)")
        lines.append("")
        if let engineBaseline {
            lines.append(
                "engine alone (pushrelay apns push, \(configuration.apnsConnections) connections): "
                    + "\(f(engineBaseline.notificationsPerSecond))/s, \(engineBaseline.delivered)/\(engineBaseline.count) delivered"
            )
        }
        if let singles {
            lines.append(
                "single sends: \(singles.count); ack p50/p99/p99.9 \(f(singles.ackMilliseconds.p50, 2))/"
                    + "\(f(singles.ackMilliseconds.p99, 2))/\(f(singles.ackMilliseconds.p999, 2)) ms; APNs answer "
                    + "\(f(singles.apnsMilliseconds.p50, 2))/\(f(singles.apnsMilliseconds.p99, 2))/"
                    + "\(f(singles.apnsMilliseconds.p999, 2)) ms (\(singles.withoutReceipt) without receipt)"
            )
        }
        if let groups {
            lines.append(
                "group sends: \(groups.count) x \(configuration.groupSize) users = \(groups.recipients) recipients in "
                    + "\(f(groups.seconds, 1)) s; ack p50/p99 \(f(groups.ackMilliseconds.p50, 2))/"
                    + "\(f(groups.ackMilliseconds.p99, 2)) ms"
            )
        }
        if let idleConnections {
            lines.append(
                "idle connections: \(idleConnections.count), relay RSS \(f(idleConnections.rssBeforeMiB, 1)) -> "
                    + "\(f(idleConnections.rssAfterMiB, 1)) MiB = \(f(idleConnections.kibPerConnection, 1)) KiB each"
            )
        }
        lines.append("")
        lines.append(
            "fan-out      tenant         seconds   notif/s  vs engine  time ratio  CPU s/100k  peak RSS MiB  PG rows/s  delivered/failed/skipped"
        )
        for fanOut in fanOuts {
            let ratio = fanOut.timeRatioToPrevious.map { "\(f($0, 2)) (x\(f(fanOut.sizeRatioToPrevious ?? 0)))" } ?? "-"
            let engine = fanOut.rateOverEngine.map { "\(f(100 * $0, 1))%" } ?? "-"
            lines.append(
                [
                    "\(fanOut.size)".padding(toLength: 12, withPad: " ", startingAt: 0),
                    fanOut.tenant.padding(toLength: 14, withPad: " ", startingAt: 0),
                    f(fanOut.seconds, 2).leftPadded(8), f(fanOut.notificationsPerSecond).leftPadded(9),
                    engine.leftPadded(10), ratio.leftPadded(11), f(fanOut.relayCPUSecondsPer100k, 2).leftPadded(11),
                    f(fanOut.relayPeakRSSMiB, 1).leftPadded(13), f(fanOut.postgresRowsPerSecond).leftPadded(10),
                    " \(fanOut.delivered)/\(fanOut.failed)/\(fanOut.skipped)",
                ].joined(separator: " ")
            )
        }
        lines += providerLines
        for fanOut in fanOuts {
            guard let runs = fanOut.runs, runs.count > 1 else { continue }
            lines.append(
                "fan-out \(fanOut.size): \(runs.count) runs, the median one above; seconds "
                    + runs.map { f($0.seconds, 3) }.joined(separator: ", ")
                    + (runs.allSatisfy { $0.rateOverEngine != nil }
                        ? "; of the engine alone "
                            + runs.map { "\(f(100 * ($0.rateOverEngine ?? 0), 1))%" }.joined(
                                separator: ", ") : "")
            )
        }
        for fanOut in fanOuts {
            guard let first = fanOut.firstSendMilliseconds, let last = fanOut.lastAnswerToCompletionMilliseconds else {
                continue
            }
            lines.append(
                "fan-out \(fanOut.size): first send \(f(first, 1)) ms after the request; job completed \(f(last, 1)) ms "
                    + "after the last APNs answer"
            )
        }
        lines.append("")
        lines.append("relay: peak RSS \(f(relay.peakRSSMiB, 1)) MiB, \(f(relay.cpuSeconds, 1)) CPU seconds in all")
        lines.append(
            "outcomes: "
                + outcomes.map { "\($0.outcome)\($0.reason.isEmpty ? "" : " \($0.reason)") \($0.rows)" }
                .joined(separator: ", ")
        )
        lines.append(
            "accounting: \(accounting.accepted) accepted, \(accounting.recorded) recorded, \(accounting.jobsCompleted)/"
                + "\(accounting.jobs) jobs completed: "
                + (accounting.consistent
                    ? "consistent" : "INCONSISTENT: " + accounting.problems.joined(separator: "; "))
        )
        return lines.joined(separator: "\n")
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
