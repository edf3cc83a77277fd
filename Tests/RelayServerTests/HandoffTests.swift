import Foundation
import Testing

@testable import RelayServer
@testable import RelayStore

@Suite("Work handed over to a process's waiting loops: pages with their devices, as a planner writes them")
struct HandoffTests {
    private typealias PageHandoff = Handoff<(page: JobPage, devices: [DeviceTarget])>

    private let page = JobPage(
        jobID: "8c1f6a52-4a0e-4f43-9d4e-2b8f3f5e7a10", page: 1, tenantID: "circl", dueAt: Date(), tokens: [],
        users: [], topicRange: TopicRange(topic: "news", after: "", last: "ab"), claims: 1)

    /// A loop waiting on `signal`, once `handoff` counts it and has promised it a page.
    private func loopPromisedAPage(_ handoff: PageHandoff, _ signal: WakeSignal) async throws -> Task<Void, Never> {
        let waiter = Task { await handoff.waitIdle(on: signal) }
        while !handoff.promise() { try await Task.sleep(for: .milliseconds(5)) }
        return waiter
    }

    @Test("a page is promised only to a waiting loop, once, and taken by the first loop that looks")
    func promisedToWaitingLoops() async throws {
        let handoff = PageHandoff()
        let signal = WakeSignal()
        // No loop waits: the page is written for anyone to claim.
        #expect(!handoff.promise())
        let waiter = try await loopPromisedAPage(handoff, signal)
        // The one waiting loop has a page promised: the next page is not.
        #expect(!handoff.promise())
        let devices = [DeviceTarget(userID: "ann", token: "ab", destination: .apns(.production), timeZone: nil)]
        handoff.hand((page, devices))
        signal.wakeOne()
        await waiter.value
        let taken = try #require(handoff.take())
        #expect(taken.page == page && taken.devices == devices)
        #expect(handoff.take() == nil)
    }

    @Test("at shutdown the pages no loop took are drained, and their promises with them")
    func drainedAtShutdown() async throws {
        let handoff = PageHandoff()
        let signal = WakeSignal()
        let waiter = try await loopPromisedAPage(handoff, signal)
        handoff.hand((page, []))
        #expect(handoff.drain().map(\.page) == [page])
        #expect(handoff.take() == nil && handoff.drain().isEmpty)
        // The loop still waits and has nothing promised: the next page may be promised to it.
        #expect(handoff.promise())
        handoff.withdraw()
        signal.close()
        await waiter.value
    }

    @Test("a withdrawn promise frees the waiting loop for the next page")
    func withdrawn() async throws {
        let handoff = PageHandoff()
        let signal = WakeSignal()
        let waiter = try await loopPromisedAPage(handoff, signal)
        handoff.withdraw()
        #expect(handoff.promise())
        handoff.withdraw()
        signal.close()
        await waiter.value
        // The loop no longer waits.
        #expect(!handoff.promise())
    }
}
