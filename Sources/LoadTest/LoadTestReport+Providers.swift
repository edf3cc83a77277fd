import Foundation

/// The FCM and mixed fan-outs beside the APNs ones: their relay CPU per notification against the APNs fan-out of
/// the same size (FCM's target: at most ``fcmCPURatioTarget`` times APNs's at 1,000,000 devices), and their rows
/// of the text report.
extension LoadTestReport {
    /// The most relay CPU per notification the FCM path may take, as a multiple of the APNs path's, at 1,000,000
    /// devices.
    package static let fcmCPURatioTarget = 1.5

    /// Sets ``FanOut/apnsCPURatio`` of the FCM and mixed fan-outs (``apnsCPURatio(of:)``).
    package mutating func compareWithAPNs() {
        let fcmRatio = fcmFanOut.flatMap { apnsCPURatio(of: $0) }
        let mixedRatio = mixedFanOut.flatMap { apnsCPURatio(of: $0) }
        fcmFanOut?.apnsCPURatio = fcmRatio
        mixedFanOut?.apnsCPURatio = mixedRatio
    }

    /// `fanOut`'s relay CPU per 100,000 notifications over that of the APNs fan-out of the same size
    /// (``fanOuts``); `nil` when the run had none of that size, or it took no CPU.
    package func apnsCPURatio(of fanOut: FanOut) -> Double? {
        guard let apns = fanOuts.first(where: { $0.size == fanOut.size }), apns.relayCPUSecondsPer100k > 0 else {
            return nil
        }
        return fanOut.relayCPUSecondsPer100k / apns.relayCPUSecondsPer100k
    }

    /// The text report's table of the FCM and mixed fan-outs, each with its CPU ratio to APNs and, when it ran
    /// several times, its runs' times; nothing when the run had neither.
    var providerLines: [String] {
        let rows = [("FCM", fcmFanOut), ("mixed", mixedFanOut)].compactMap { name, fanOut in fanOut.map { (name, $0) } }
        guard !rows.isEmpty else { return [] }
        func f(_ value: Double, _ digits: Int = 0) -> String { String(format: "%.\(digits)f", value) }
        func pad(_ text: String, _ width: Int) -> String {
            text.count >= width ? text : String(repeating: " ", count: width - text.count) + text
        }
        var lines = [
            "",
            "provider fan-out   devices (APNs + FCM)     tenant         seconds   notif/s  CPU s/100k  vs APNs CPU  "
                + "peak RSS MiB  delivered/failed/skipped",
        ]
        for (name, fanOut) in rows {
            let fcm = fanOut.fcmDevices ?? fanOut.size
            lines.append(
                [
                    "\(name) \(fanOut.size)".padding(toLength: 18, withPad: " ", startingAt: 0),
                    "\(fanOut.size - fcm) + \(fcm)".padding(toLength: 24, withPad: " ", startingAt: 0),
                    fanOut.tenant.padding(toLength: 14, withPad: " ", startingAt: 0),
                    pad(f(fanOut.seconds, 2), 8), pad(f(fanOut.notificationsPerSecond), 9),
                    pad(f(fanOut.relayCPUSecondsPer100k, 2), 11),
                    pad(fanOut.apnsCPURatio.map { "\(f($0, 2))x" } ?? "-", 12), pad(f(fanOut.relayPeakRSSMiB, 1), 13),
                    " \(fanOut.delivered)/\(fanOut.failed)/\(fanOut.skipped)",
                ].joined(separator: " ")
            )
        }
        for (name, fanOut) in rows {
            if let ratio = fanOut.apnsCPURatio {
                let target =
                    fanOut.size == 1_000_000 && name == "FCM"
                    ? "; target at most \(f(Self.fcmCPURatioTarget, 1))x: \(ratio <= Self.fcmCPURatioTarget ? "met" : "NOT met")"
                    : ""
                lines.append(
                    "\(name) fan-out \(fanOut.size): relay CPU per notification \(f(ratio, 2))x the APNs fan-out of "
                        + "\(fanOut.size)'s\(target)")
            } else {
                lines.append(
                    "\(name) fan-out \(fanOut.size): no APNs fan-out of \(fanOut.size) in the run to compare with")
            }
            if let runs = fanOut.runs, runs.count > 1 {
                lines.append(
                    "\(name) fan-out \(fanOut.size): \(runs.count) runs, the median one above; seconds "
                        + runs.map { f($0.seconds, 3) }.joined(separator: ", "))
            }
        }
        return lines
    }
}
