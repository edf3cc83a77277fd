import PushRelayProtocol
import Synchronization
import Testing

@testable import RelayServer

@Suite("Each tenant's share of the database")
struct TenantStatementGateTests {
    /// Counts the bodies running now and the most at once.
    private final class Running: Sendable {
        let state = Mutex<(now: Int, most: Int)>((0, 0))
        func enter() {
            state.withLock {
                $0.now += 1; $0.most = max($0.most, $0.now)
            }
        }
        func leave() { state.withLock { $0.now -= 1 } }
    }

    @Test("a tenant runs at most its limit of statements at once; another tenant's go past its queue")
    func boundedPerTenant() async throws {
        let gate = TenantStatementGate(limit: 4)
        let circl = Running()
        let release = WakeSignal()
        try await withThrowingTaskGroup(of: Void.self) { group in
            // 12 of circl's statements that hold their slot until released.
            for _ in 0..<12 {
                group.addTask {
                    try await gate.run(tenant: "circl") { () async throws(ProtocolError) in
                        circl.enter()
                        await release.wait()
                        circl.leave()
                    }
                }
            }
            // Wait until circl holds all its slots.
            while circl.state.withLock({ $0.now }) < 4 { await Task.yield() }
            // familyportal's statement runs at once, though eight of circl's wait.
            let answer = try await gate.run(tenant: "familyportal") { () async throws(ProtocolError) in 42 }
            #expect(answer == 42)
            #expect(circl.state.withLock { $0.now } == 4)
            // Released, each freed slot goes to the next waiting one: all twelve run, never more than four at once.
            release.close()
            try await group.waitForAll()
        }
        #expect(circl.state.withLock { $0.most } == 4)
    }

    @Test("a statement that throws frees its slot")
    func throwingFreesSlot() async throws {
        let gate = TenantStatementGate(limit: 1)
        await #expect(throws: ProtocolError.self) {
            try await gate.run(tenant: "circl") { () async throws(ProtocolError) in
                throw ProtocolError(.unavailable, "database away")
            }
        }
        let answer = try await gate.run(tenant: "circl") { () async throws(ProtocolError) in "next" }
        #expect(answer == "next")
    }
}
