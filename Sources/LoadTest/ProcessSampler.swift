import Foundation

/// One reading of a process's resident memory and CPU time, from `/proc`.
struct ProcessReading: Sendable, Codable, Hashable {
    /// Seconds since the run started.
    var t: Double
    /// Resident set size, bytes.
    var rssBytes: Int
    /// User and system CPU seconds since the process started.
    var cpuSeconds: Double

    /// Reads `/proc/<pid>/status` (VmRSS) and `/proc/<pid>/stat` (utime, stime); `nil` once the process is gone.
    static func read(pid: Int32, at t: Double) -> ProcessReading? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let rss = kibibytes(of: "VmRSS", in: status),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        // After the command name: state is field 3, utime field 14, stime field 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        return ProcessReading(t: t, rssBytes: rss * 1024, cpuSeconds: (user + system) / ticks)
    }

    /// The peak resident set size of `pid` so far (VmHWM), bytes.
    static func peakRSS(pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        return kibibytes(of: "VmHWM", in: status).map { $0 * 1024 }
    }

    private static func kibibytes(of field: String, in status: String) -> Int? {
        for line in status.split(separator: "\n") where line.hasPrefix(field + ":") {
            return line.split(separator: " ").dropFirst().first.flatMap { Int($0) }
        }
        return nil
    }
}
