import RelayStore
import Testing

@testable import RelayServer

@Suite("The planner's devices handed to the page loops")
struct PlannedDevicesTests {
    private func devices(_ count: Int) -> [DeviceTarget] {
        (0..<count).map {
            DeviceTarget(
                userID: "user\($0)", token: String(repeating: "a", count: 63) + "\($0)", environment: .production,
                timeZone: nil)
        }
    }

    @Test("a page's devices are taken once, by job and page")
    func takenOnce() {
        let planned = PlannedDevices()
        planned.keep(devices(3), jobID: "job", page: 1)
        planned.keep(devices(2), jobID: "job", page: 2)
        #expect(planned.take(jobID: "job", page: 3) == nil)
        #expect(planned.take(jobID: "other", page: 1) == nil)
        #expect(planned.take(jobID: "job", page: 1) == devices(3))
        #expect(planned.take(jobID: "job", page: 1) == nil)
        #expect(planned.take(jobID: "job", page: 2) == devices(2))
    }

    @Test("devices older than the age limit are not handed out: the page is read again")
    func tooOld() async throws {
        let planned = PlannedDevices(maxAge: .milliseconds(20))
        planned.keep(devices(1), jobID: "job", page: 1)
        try await Task.sleep(for: .milliseconds(50))
        #expect(planned.take(jobID: "job", page: 1) == nil)
    }

    @Test("at capacity a page is not kept until older pages have aged out")
    func capacity() async throws {
        let planned = PlannedDevices(capacity: 2, maxAge: .milliseconds(500))
        planned.keep(devices(1), jobID: "a", page: 1)
        planned.keep(devices(1), jobID: "b", page: 1)
        planned.keep(devices(1), jobID: "c", page: 1)
        #expect(planned.take(jobID: "c", page: 1) == nil)
        // Pages that nobody took (another process claimed them) make room once they are too old.
        try await Task.sleep(for: .milliseconds(600))
        planned.keep(devices(1), jobID: "d", page: 1)
        #expect(planned.take(jobID: "d", page: 1) == devices(1))
        #expect(planned.take(jobID: "a", page: 1) == nil)
    }
}
