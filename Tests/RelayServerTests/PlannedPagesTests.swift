import Foundation
import Testing

@testable import RelayServer
@testable import RelayStore

@Suite("Devices kept for the pages a planner wrote for any process")
struct PlannedPagesTests {
    private let job = "8C1F6A52-4A0E-4F43-9D4E-2B8F3F5E7A10"
    private let devices = [
        DeviceTarget(userID: "u1", token: "ab", destination: .apns(.production), timeZone: nil),
        DeviceTarget(userID: "u2", token: "cd", destination: .apns(.development), timeZone: "Europe/Zurich"),
    ]

    @Test("a page's devices are taken once, by job and page, whatever the case of the job id")
    func takenOnce() {
        let pages = PlannedPages()
        pages.keep(devices, jobID: job, page: 3)
        #expect(pages.take(jobID: job.lowercased(), page: 2) == nil)
        #expect(pages.take(jobID: job.lowercased(), page: 3) == devices)
        #expect(pages.take(jobID: job, page: 3) == nil)
    }

    @Test("devices older than the maximum age are not used; a full cache keeps no more until its old pages go")
    func boundedInAgeAndCount() {
        let pages = PlannedPages()
        let start = ContinuousClock.now
        pages.keep(devices, jobID: job, page: 1, now: start)
        #expect(pages.take(jobID: job, page: 1, now: start + PlannedPages.maximumAge + .seconds(1)) == nil)

        for page in 1...PlannedPages.capacity {
            pages.keep(devices, jobID: job, page: page, now: start)
        }
        #expect(!pages.hasRoom(now: start))
        pages.keep(devices, jobID: job, page: 999, now: start)
        #expect(pages.take(jobID: job, page: 999, now: start) == nil)
        #expect(pages.take(jobID: job, page: 1, now: start) == devices)
        #expect(pages.hasRoom(now: start))
        // Once the kept pages are too old, they make room.
        pages.keep(devices, jobID: job, page: 1, now: start)
        #expect(!pages.hasRoom(now: start))
        #expect(pages.hasRoom(now: start + PlannedPages.maximumAge + .seconds(1)))
    }
}
