import Foundation
import Logging
import NIOCore
import PushRelayProtocol
import Testing

@testable import RelayServer

extension RelayServerSuites {
    /// The relay's connection caps, in all and per tenant.
    @Suite struct ConnectionCapTests {
        @Test func aConnectionOverTheRelaysCapIsRefusedAtOnceAndOneClosedMakesRoom() async throws {
            try await RelayHarness.with(configure: { $0.maximumConnections = 2 }) { relay in
                let first = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                let second = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                #expect(await eventually { relay.listener.connectionCount == 2 })
                let third = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                let refusal = try #require(await third.next())
                #expect(refusal.kind == .error && refusal.requestID == 0)
                let error = try refusal.decode(Pushrelay_V1_Error.self)
                #expect(error.code == .tooManyConnections && error.retryAfterMs > 0)
                #expect(await third.next() == nil, "the refused connection is closed")
                await first.close()
                #expect(await eventually { relay.listener.connectionCount == 1 })
                let fourth = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                let answer = try #require(await fourth.hello(tenant: "circl", credential: relay.credentials["circl"]!))
                #expect(answer.kind == FrameKind.hello.answer)
                await second.close()
                await fourth.close()
            }
        }

        @Test func aTenantOverItsCapIsRefusedAtHelloWhileOtherTenantsConnect() async throws {
            try await RelayHarness.with(configure: { $0.maximumConnectionsPerTenant = 1 }) { relay in
                let circl = relay.credentials["circl"]!
                let first = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                #expect(try await first.hello(tenant: "circl", credential: circl)?.kind == FrameKind.hello.answer)
                let second = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                let refusal = try #require(try await second.hello(tenant: "circl", credential: circl))
                #expect(refusal.kind == .error)
                #expect(try refusal.decode(Pushrelay_V1_Error.self).code == .tooManyConnections)
                #expect(await second.next() == nil, "the refused connection is closed")
                let other = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                let family = try await other.hello(
                    tenant: "familyportal", credential: relay.credentials["familyportal"]!)
                #expect(family?.kind == FrameKind.hello.answer)
                // The cap is given back when the tenant's connection closes.
                await first.close()
                let admitted = await eventually {
                    guard let again = try? await RawConnection.connect(port: relay.listener.port, group: relay.group)
                    else { return false }
                    defer { Task { await again.close() } }
                    return (try? await again.hello(tenant: "circl", credential: circl))?.kind == FrameKind.hello.answer
                }
                #expect(admitted)
                await other.close()
            }
        }

        @Test func anAddressThatKeepsFailingHellosIsSlowedButTheRightCredentialStillGetsIn() async throws {
            try await RelayHarness.with { relay in
                for attempt in 0..<ConnectionAdmission.failuresPerWindow + 2 {
                    let connection = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                    let answer = try #require(
                        try await connection.hello(tenant: "circl", credential: "prk_wrong\(attempt)"))
                    #expect(try answer.decode(Pushrelay_V1_Error.self).code == .authenticationFailed)
                    await connection.close()
                }
                let connection = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                let answer = try await connection.hello(tenant: "circl", credential: relay.credentials["circl"]!)
                #expect(answer?.kind == FrameKind.hello.answer)
                await connection.close()
            }
        }
    }
}

/// The failed-HELLO accounting on explicit instants.
@Suite struct ConnectionAdmissionTests {
    @Test func checksOfAnAddressOverItsFailureBudgetAreSpacedOutUntilItsWindowEnds() {
        let admission = ConnectionAdmission(maximumPerTenant: 2, logger: quietLogger)
        let start = ContinuousClock.now
        for _ in 0..<ConnectionAdmission.failuresPerWindow {
            #expect(admission.checkDelay(for: "192.0.2.7", now: start) == .zero)
            admission.noteFailure(from: "192.0.2.7", now: start)
        }
        // Over budget: one check every 100 ms, however many connections ask at once.
        let spacing = ConnectionAdmission.checkSpacing
        #expect(admission.checkDelay(for: "192.0.2.7", now: start) == .zero)
        #expect(admission.checkDelay(for: "192.0.2.7", now: start) == spacing)
        #expect(admission.checkDelay(for: "192.0.2.7", now: start) == spacing * 2)
        // Another address is not slowed.
        #expect(admission.checkDelay(for: "198.51.100.1", now: start) == .zero)
        // A new window starts with a fresh budget.
        let later = start + ConnectionAdmission.failureWindow + .seconds(1)
        #expect(admission.checkDelay(for: "192.0.2.7", now: later) == .zero)
        admission.noteFailure(from: "192.0.2.7", now: later)
        #expect(admission.checkDelay(for: "192.0.2.7", now: later) == .zero)
    }

    @Test func failedHellosAreLoggedAsARateNotALineEach() {
        let lines = CapturedLines()
        let logger = Logger(label: "pushrelay") { _ in CapturingLogHandler(lines: lines) }
        let admission = ConnectionAdmission(maximumPerTenant: 2, logger: logger)
        let start = ContinuousClock.now
        // 500 failures from 3 addresses within a minute: the first is logged at once, the rest not yet.
        for index in 0..<500 {
            admission.noteFailure(from: "192.0.2.\(index % 3)", now: start + .milliseconds(index))
        }
        #expect(lines.entries.count == 1)
        #expect(lines.entries.first?.message == "failed HELLOs" && lines.entries.first?.metadata["failed"] == "1")
        // A minute later the next failure logs the sum since: one line for 500 failures.
        admission.noteFailure(from: "192.0.2.9", now: start + ConnectionAdmission.summaryInterval)
        let entries = lines.entries
        #expect(entries.count == 2)
        #expect(entries.last?.metadata["failed"] == "500" && entries.last?.metadata["addresses"] == "4")
    }

    @Test func aTenantsConnectionsAreCappedAndGivenBack() {
        let admission = ConnectionAdmission(maximumPerTenant: 2, logger: quietLogger)
        #expect(admission.admit(tenant: "circl") && admission.admit(tenant: "circl"))
        #expect(!admission.admit(tenant: "circl"))
        #expect(admission.admit(tenant: "argus"))
        admission.release(tenant: "circl")
        #expect(admission.connections(of: "circl") == 1)
        #expect(admission.admit(tenant: "circl"))
    }
}

extension RelayServerSuites {
    /// A request is charged by its cost against its credential's limit: a query of 1,000 rows is not a PING.
    @Suite struct RequestCostTests {
        @Test func aLargeDeliveryQueryCostsItsRowsAndTheNextRequestWaitsForThem() async throws {
            try await RelayHarness.with(requestsPerSecond: 1, requestBurst: 100) { relay in
                let connection = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                _ = try #require(await connection.hello(tenant: "circl", credential: relay.credentials["circl"]!))
                var query = Pushrelay_V1_QueryDeliveries()
                query.userID = "ada"
                query.limit = 1_000
                try await connection.send(kind: .queryDeliveries, requestID: 2, message: query)
                #expect(await connection.next()?.kind == FrameKind.queryDeliveries.answer)
                var list = Pushrelay_V1_ListDevices()
                list.userID = "ada"
                try await connection.send(kind: .listDevices, requestID: 3, message: list)
                let refusal = try #require(await connection.next())
                let error = try refusal.decode(Pushrelay_V1_Error.self)
                #expect(error.code == .rateLimited)
                // The query took all 100 tokens (one for the frame, 99 for its rows): the listing's frame waits for
                // the next token.
                #expect(error.retryAfterMs > 500 && error.retryAfterMs <= 1_000)
                await connection.close()
            }
        }

        @Test func aRegistrationCostsTwoTokensAndAPingOne() async throws {
            try await RelayHarness.with(requestsPerSecond: 1, requestBurst: 5) { relay in
                let connection = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                _ = try #require(await connection.hello(tenant: "circl", credential: relay.credentials["circl"]!))
                // Two registrations take four of the five tokens, a PING the fifth.
                for id: UInt32 in 2...3 {
                    try await connection.send(
                        kind: .registerDevice, requestID: id, message: registration(user: "ada", token: randomToken()))
                    #expect(await connection.next()?.kind == FrameKind.registerDevice.answer)
                }
                var ping = Pushrelay_V1_Ping()
                ping.nonce = 1
                try await connection.send(kind: .ping, requestID: 4, message: ping)
                #expect(await connection.next()?.kind == FrameKind.ping.answer)
                try await connection.send(
                    kind: .registerDevice, requestID: 5, message: registration(user: "ada", token: randomToken()))
                let refusal = try #require(await connection.next())
                #expect(try refusal.decode(Pushrelay_V1_Error.self).code == .rateLimited)
                #expect(RequestCost.writeTokens(of: .setMute) == 1 && RequestCost.writeTokens(of: .send) == 0)
                await connection.close()
            }
        }
    }
}
