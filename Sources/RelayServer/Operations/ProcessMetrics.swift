import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The process's own series, in the names of Prometheus' client libraries (`process_cpu_seconds_total`,
/// `process_resident_memory_bytes`, ...), read from `/proc` at each scrape: what every exporter has, so that
/// the usual dashboards and alerts work on the relay.
struct ProcessMetrics: Equatable {
    /// User and system CPU time, in seconds.
    var cpuSeconds: Double
    /// Resident memory, in bytes.
    var residentBytes: Int
    /// Virtual memory, in bytes.
    var virtualBytes: Int
    /// Open file descriptors.
    var openFDs: Int
    /// The limit on open file descriptors.
    var maxFDs: Int
    /// When the process started, in seconds since the Unix epoch.
    var startTimeSeconds: Double

    /// This process's figures now, or `nil` where `/proc` cannot be read (not Linux).
    static func current() -> ProcessMetrics? {
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
            let system = try? String(contentsOfFile: "/proc/stat", encoding: .utf8)
        else { return nil }
        // The fields after the command name, which is in parentheses and may itself hold spaces: the third
        // field of stat(5) is the first here.
        guard let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        func field(_ number: Int) -> Double? { fields.count > number - 3 ? Double(fields[number - 3]) : nil }
        guard let user = field(14), let kernel = field(15), let start = field(22), let virtual = field(23),
            let residentPages = field(24),
            let bootLine = system.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }),
            let boot = Double(bootLine.dropFirst("btime ".count))
        else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        var limit = rlimit()
        let maxFDs = getrlimit(RLIMIT_NOFILE_VALUE, &limit) == 0 ? Int(clamping: limit.rlim_cur) : 0
        let openFDs = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
        return ProcessMetrics(
            cpuSeconds: (user + kernel) / ticks, residentBytes: Int(residentPages) * Int(sysconf(Int32(_SC_PAGESIZE))),
            virtualBytes: Int(virtual), openFDs: openFDs, maxFDs: maxFDs, startTimeSeconds: boot + start / ticks)
    }

    /// The figures in Prometheus' text exposition, each family with its `# HELP` and `# TYPE`.
    var exposition: String {
        let families: [(name: String, kind: String, help: String, value: String)] = [
            (
                "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
                "\(cpuSeconds)"
            ),
            ("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", "\(residentBytes)"),
            ("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", "\(virtualBytes)"),
            ("process_open_fds", "gauge", "Number of open file descriptors.", "\(openFDs)"),
            ("process_max_fds", "gauge", "Maximum number of open file descriptors.", "\(maxFDs)"),
            (
                "process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.",
                "\(startTimeSeconds)"
            ),
        ]
        return families.map { "# HELP \($0.name) \($0.help)\n# TYPE \($0.name) \($0.kind)\n\($0.name) \($0.value)\n" }
            .joined()
    }
}

#if canImport(Glibc)
    /// `RLIMIT_NOFILE` as `getrlimit` takes it (Glibc imports it as an enum case).
    private let RLIMIT_NOFILE_VALUE = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
#endif
