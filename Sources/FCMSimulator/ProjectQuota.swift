import Foundation

/// Google's per-project send quota: at most N messages a minute, the minute starting at its first message (Google's
/// minutes are not aligned to the clock). A value kept under the simulator's lock; time is passed in.
struct ProjectQuota: Sendable {
    /// One project's current minute.
    private struct Window: Sendable {
        /// When the minute began: at its first message.
        var start: Date
        /// Messages in it so far.
        var count: Int
    }

    /// The current minute of each project that sent.
    private var windows: [String: Window] = [:]

    /// No project has sent yet.
    init() {}

    /// Counts a message of `project` at `now` against `limit` a minute: nil when it is within the quota, otherwise
    /// the seconds until the minute is over (at least 1), for `Retry-After`.
    mutating func admit(project: String, now: Date, limit: Int) -> Int? {
        var window = windows[project] ?? Window(start: now, count: 0)
        if now.timeIntervalSince(window.start) >= 60 || now < window.start { window = Window(start: now, count: 0) }
        guard window.count < limit else {
            return max(1, Int((60 - now.timeIntervalSince(window.start)).rounded(.up)))
        }
        window.count += 1
        windows[project] = window
        return nil
    }
}
