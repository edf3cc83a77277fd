import RelayStore
import Synchronization

/// The devices this process's planners read for the topic pages they wrote for any process to claim, while
/// every loop of theirs was busy: the loop of this process that claims such a page soon after sends to them
/// instead of reading its range again.
///
/// At most ``capacity`` pages, each used for ``maximumAge`` after its planner read it (a device registered or
/// gone since then is not seen, as with a page handed over); a page that another process claims leaves its
/// entry to age out.
final class PlannedPages: Sendable {
    /// The most pages kept (about 600 kB a page of 4,000 devices).
    static let capacity = 32
    /// How long kept devices stand for their page.
    static let maximumAge: Duration = .seconds(10)

    private let pages = Mutex<[String: (devices: [DeviceTarget], at: ContinuousClock.Instant)]>([:])

    /// Whether another page fits, after the pages too old to use are let go.
    func hasRoom(now: ContinuousClock.Instant = .now) -> Bool {
        pages.withLock { pages in
            if pages.count >= Self.capacity {
                pages = pages.filter { now - $0.value.at <= Self.maximumAge }
            }
            return pages.count < Self.capacity
        }
    }

    /// Keeps the devices of page `page` of job `jobID`, read at `now`, unless there is no room.
    func keep(_ devices: [DeviceTarget], jobID: String, page: Int, now: ContinuousClock.Instant = .now) {
        pages.withLock { pages in
            guard pages.count < Self.capacity else { return }
            pages[Self.key(jobID, page)] = (devices, now)
        }
    }

    /// The devices kept for page `page` of job `jobID`, once, if they are recent enough.
    func take(jobID: String, page: Int, now: ContinuousClock.Instant = .now) -> [DeviceTarget]? {
        guard let kept = pages.withLock({ $0.removeValue(forKey: Self.key(jobID, page)) }) else { return nil }
        return now - kept.at <= Self.maximumAge ? kept.devices : nil
    }

    private static func key(_ jobID: String, _ page: Int) -> String {
        "\(jobID.lowercased())/\(page)"
    }
}
