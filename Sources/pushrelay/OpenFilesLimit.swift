#if canImport(Glibc)
    import Glibc
#endif

/// The process's open-files limit: every connection holds a descriptor, so `serve` raises its soft limit to the hard
/// one at start (as far as it may without privileges) and says what it got.
enum OpenFilesLimit {
    /// Raises the soft limit to the hard limit; returns the soft limit before and after, and the hard limit.
    static func raise() -> (before: UInt64, after: UInt64, hard: UInt64) {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return (0, 0, 0) }
        let before = UInt64(limit.rlim_cur)
        let hard = UInt64(limit.rlim_max)
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { return (before, hard, hard) }
        }
        return (before, before, hard)
    }
}
