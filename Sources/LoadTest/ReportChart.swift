import Foundation

/// Draws a report's timeline as an SVG: notifications answered per second, APNs latency (p50 and p99) and the
/// relay's RSS over the run, with each phase marked.
struct ReportChart {
    /// A phase drawn as a shaded span.
    struct Phase {
        /// Its label.
        var label: String
        /// Start and end, seconds since the run started.
        var start: Double
        /// End.
        var end: Double
    }

    let timeline: [LoadTestReport.TimelinePoint]
    let rss: [ProcessReading]
    let phases: [Phase]
    let title: String

    private let width = 1000.0
    private let panelHeight = 190.0
    private let left = 70.0
    private let right = 20.0
    private let top = 40.0
    private let gap = 45.0

    /// The SVG document.
    func svg() -> String {
        let end = max(timeline.map(\.t).max() ?? 0, rss.map(\.t).max() ?? 0, phases.map(\.end).max() ?? 0, 1)
        var out = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(top + 3 * (panelHeight + gap)))" \
            font-family="sans-serif" font-size="11">
            <rect width="100%" height="100%" fill="white"/>
            <text x="\(left)" y="22" font-size="14" font-weight="bold">\(escape(title))</text>

            """
        let panels: [(String, [(String, String, [(Double, Double)])])] = [
            (
                "notifications answered by APNs per second",
                [("answered/s", "#1f77b4", timeline.map { ($0.t, Double($0.answered)) })]
            ),
            (
                "APNs latency (send to answer), ms",
                [
                    ("p50", "#2ca02c", timeline.map { ($0.t, $0.p50Milliseconds) }),
                    ("p99", "#d62728", timeline.map { ($0.t, $0.p99Milliseconds) }),
                ]
            ),
            ("relay RSS, MiB", [("RSS", "#9467bd", rss.map { ($0.t, Double($0.rssBytes) / 1_048_576) })]),
        ]
        for (index, (label, series)) in panels.enumerated() {
            out += panel(index: index, label: label, series: series, end: end)
        }
        out += "</svg>\n"
        return out
    }

    private func panel(index: Int, label: String, series: [(String, String, [(Double, Double)])], end: Double) -> String
    {
        let y0 = top + Double(index) * (panelHeight + gap)
        let plotWidth = width - left - right
        let maxValue = niceCeiling(series.flatMap { $0.2.map(\.1) }.max() ?? 1)
        func x(_ t: Double) -> Double { left + plotWidth * t / end }
        func y(_ v: Double) -> Double { y0 + panelHeight - panelHeight * min(v, maxValue) / maxValue }
        var out = "<text x=\"\(left)\" y=\"\(f(y0 - 8))\" font-weight=\"bold\">\(escape(label))</text>\n"
        for (n, phase) in phases.enumerated() {
            let shade = n % 2 == 0 ? "#f2f2f2" : "#e6eef7"
            out +=
                "<rect x=\"\(f(x(phase.start)))\" y=\"\(f(y0))\" width=\"\(f(max(x(phase.end) - x(phase.start), 1)))\" "
                + "height=\"\(f(panelHeight))\" fill=\"\(shade)\"/>\n"
            if index == 0 {
                out +=
                    "<text x=\"\(f(x(phase.start) + 2))\" y=\"\(f(y0 + 12))\" fill=\"#555\">\(escape(phase.label))</text>\n"
            }
        }
        out +=
            "<rect x=\"\(left)\" y=\"\(f(y0))\" width=\"\(f(plotWidth))\" height=\"\(f(panelHeight))\" fill=\"none\" stroke=\"#999\"/>\n"
        for step in 0...4 {
            let value = maxValue * Double(step) / 4
            out +=
                "<line x1=\"\(left - 4)\" x2=\"\(left)\" y1=\"\(f(y(value)))\" y2=\"\(f(y(value)))\" stroke=\"#999\"/>\n"
            out +=
                "<text x=\"\(left - 6)\" y=\"\(f(y(value) + 4))\" text-anchor=\"end\">\(axisLabel(value))</text>\n"
        }
        let tickStep = niceCeiling(end / 8)
        var tick = 0.0
        while tick <= end {
            out +=
                "<text x=\"\(f(x(tick)))\" y=\"\(f(y0 + panelHeight + 14))\" text-anchor=\"middle\">\(Int(tick))s</text>\n"
            tick += tickStep
        }
        for (n, (name, color, points)) in series.enumerated() where !points.isEmpty {
            let path = points.sorted { $0.0 < $1.0 }.map { "\(f(x($0.0))),\(f(y($0.1)))" }.joined(separator: " ")
            out += "<polyline fill=\"none\" stroke=\"\(color)\" stroke-width=\"1.5\" points=\"\(path)\"/>\n"
            let legendX = width - right - 90 * Double(series.count - n)
            out += "<rect x=\"\(f(legendX))\" y=\"\(f(y0 - 17))\" width=\"10\" height=\"10\" fill=\"\(color)\"/>\n"
            out += "<text x=\"\(f(legendX + 14))\" y=\"\(f(y0 - 8))\">\(escape(name))</text>\n"
        }
        return out
    }

    private func niceCeiling(_ value: Double) -> Double {
        guard value > 0 else { return 1 }
        let magnitude = pow(10, floor(log10(value)))
        for factor in [1.0, 2, 2.5, 5, 10] where factor * magnitude >= value {
            return factor * magnitude
        }
        return 10 * magnitude
    }

    private func axisLabel(_ value: Double) -> String {
        if value >= 10_000 { return "\(f(value / 1000))k" }
        if value >= 10 || value == 0 { return f(value) }
        return String(format: "%.1f", value)
    }

    private func f(_ value: Double) -> String { String(format: "%.0f", value) }

    private func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;")
    }
}
