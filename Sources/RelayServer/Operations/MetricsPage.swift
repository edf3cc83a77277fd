import Prometheus

/// The text of `GET /metrics`: the registry's exposition with a `# HELP` line for every family (so that
/// `promtool check metrics` finds nothing to say), then the process's own series and the build's version.
enum MetricsPage {
    /// The `pushrelay_build_info` family: the version as a label, the value always 1.
    static var buildInfo: String {
        "# HELP pushrelay_build_info The relay's version, as a label; the value is always 1.\n"
            + "# TYPE pushrelay_build_info gauge\n"
            + "pushrelay_build_info{version=\"\(RelayVersion.current)\"} 1\n"
    }

    /// The whole page for `registry`.
    static func render(_ registry: PrometheusCollectorRegistry) -> [UInt8] {
        let text = withHelp(registry.emitToString()) + buildInfo + (ProcessMetrics.current()?.exposition ?? "")
        return Array(text.utf8)
    }

    /// `exposition` with a `# HELP` line before each `# TYPE` line that has none: the text of
    /// ``RelayMetrics/help``, or for a family of a library the relay does not describe, its name in words.
    static func withHelp(_ exposition: String) -> String {
        var lines: [Substring] = []
        var described = Set<Substring>()
        for line in exposition.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("# HELP ") {
                described.insert(line.dropFirst("# HELP ".count).prefix { $0 != " " })
            } else if line.hasPrefix("# TYPE ") {
                let name = line.dropFirst("# TYPE ".count).prefix { $0 != " " }
                if !described.contains(name) {
                    let text = RelayMetrics.help[String(name)] ?? name.replacingOccurrences(of: "_", with: " ")
                    lines.append("# HELP \(name) \(text)")
                    described.insert(name)
                }
            }
            lines.append(line)
        }
        return lines.joined(separator: "\n")
    }
}
