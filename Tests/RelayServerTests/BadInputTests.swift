import Foundation
import NIOCore
import PushRelayClient
import PushRelayProtocol
import RelayServer
import Testing

extension RelayServerSuites {
    /// Bad input gets a typed ERROR frame; the connection closes only when the framing itself is broken; the
    /// relay goes on serving.
    @Suite struct BadInputTests {
        @Test func everyBadFrameGetsItsErrorAndTheConnectionGoesOn() async throws {
            try await RelayHarness.with { relay in
                let connection = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                // Before HELLO: anything else is HELLO_REQUIRED, and the connection stays.
                try await connection.send(kind: .listDevices, requestID: 5, message: Pushrelay_V1_ListDevices())
                #expect(await connection.nextError() == .helloRequired)
                let ok = try #require(await connection.hello(tenant: "circl", credential: relay.credentials["circl"]!))
                #expect(ok.kind == FrameKind.hello.answer)
                #expect(try ok.decode(Pushrelay_V1_HelloOk.self).maxFrameBytes == 1_048_576)

                try await connection.send(frameHeader(length: 0, kind: 0x0777, requestID: 6))
                #expect(await connection.nextError() == .unknownKind)
                try await connection.send(frameHeader(length: 0, version: 9, kind: 0x0002, requestID: 7))
                #expect(await connection.nextError() == .unsupportedVersion)
                try await connection.send(frameHeader(length: 0, flags: 0x80, kind: 0x0002, requestID: 8))
                #expect(await connection.nextError() == .badFrame)
                try await connection.send(frameHeader(length: 2, kind: 0x0010, requestID: 9) + [0x0A, 0xFF])
                #expect(await connection.nextError() == .invalidBody)
                // A zstd bomb: 64 MiB of zeros declared in a few bytes.
                let bomb = Zstd.compress(
                    ByteBuffer(repeating: 0, count: 64 << 20), level: 19, allocator: ByteBufferAllocator()
                )
                try await connection.send(
                    frameHeader(length: UInt32(bomb.readableBytes), flags: 0x01, kind: 0x0020, requestID: 10)
                        + Array(bomb.readableBytesView)
                )
                #expect(await connection.nextError() == .decompressedTooLarge)
                try await connection.send(
                    frameHeader(length: 4, flags: 0x01, kind: 0x0020, requestID: 11) + [1, 2, 3, 4])
                #expect(await connection.nextError() == .badCompression)
                try await connection.send(kind: .hello, requestID: 12, message: Pushrelay_V1_Hello())
                #expect(await connection.nextError() == .alreadyAuthenticated)
                try await connection.send(kind: .ping, requestID: 0, message: Pushrelay_V1_Ping())
                #expect(await connection.nextError() == .invalidArgument)
                var status = Pushrelay_V1_JobStatus()
                status.jobID = "not-a-job"
                try await connection.send(kind: .jobStatus, requestID: 13, message: status)
                #expect(await connection.nextError() == .notFound)
                // job_id (field 1, a string) sent as a varint: not silently dropped.
                try await connection.send(frameHeader(length: 2, kind: 0x0021, requestID: 15) + [0x08, 0x01])
                #expect(await connection.nextError() == .invalidBody)
                // A field the message does not have is ignored (the protocol evolves by adding fields).
                try await connection.send(frameHeader(length: 3, kind: 0x0002, requestID: 16) + [0xF8, 0x01, 0x01])
                #expect(await connection.next()?.kind == FrameKind.ping.answer)
                #expect(try await connection.pingWorks())

                // A frame declaring a body over the limit breaks the framing: error, then close.
                try await connection.send(frameHeader(length: 50_000_000, kind: 0x0020, requestID: 14))
                let tooLarge = try #require(await connection.next())
                #expect(tooLarge.requestID == 0, "an error about the connection has request id 0")
                #expect(try tooLarge.decode(Pushrelay_V1_Error.self).code == .frameTooLarge)
                #expect(await connection.isClosedByRelay())
                await connection.close()

                // The relay still serves.
                let client = relay.client("circl")
                #expect(try await client.ping(nonce: 1) == 1)
                await client.close()
            }
        }

        @Test func wrongCredentialsAreRefusedAndClosed() async throws {
            try await RelayHarness.with { relay in
                for (tenant, credential) in [
                    ("circl", "prk_not-a-real-secret"), ("familyportal", relay.credentials["circl"]!),
                    ("circl", ""),
                ] {
                    let connection = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                    let answer = try #require(await connection.hello(tenant: tenant, credential: credential))
                    #expect(answer.kind == .error)
                    #expect(try answer.decode(Pushrelay_V1_Error.self).code == .authenticationFailed)
                    #expect(await connection.isClosedByRelay())
                    await connection.close()
                }
                let client = relay.client("circl", credential: "prk_wrong")
                #expect(await errorCode { try await client.ping() } == .authenticationFailed)
            }
        }

        @Test func helloMustComeWithinTheDeadline() async throws {
            try await RelayHarness.with(configure: { $0.helloTimeout = .milliseconds(300) }) { relay in
                let connection = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                // Half a header, then silence: the relay says why it closes, on request id 0.
                try await connection.send([0, 0, 0])
                let answer = try #require(await connection.next())
                #expect(answer.kind == .error && answer.requestID == 0)
                #expect(try answer.decode(Pushrelay_V1_Error.self).code == .helloRequired)
                #expect(await connection.isClosedByRelay())
                await connection.close()
            }
        }

        @Test func idleConnectionsAreSaidGoodbyeAndClosed() async throws {
            try await RelayHarness.with(configure: { $0.idleTimeout = .milliseconds(400) }) { relay in
                let connection = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                _ = try #require(await connection.hello(tenant: "circl", credential: relay.credentials["circl"]!))
                let goodbye = try #require(await connection.next())
                #expect(goodbye.kind == .goodbye)
                #expect(goodbye.requestID == 0)
                #expect(await connection.isClosedByRelay())
                await connection.close()
            }
        }

        @Test func inFlightLimitSlowsAPipeliningClientWithoutErrors() async throws {
            try await RelayHarness.with(configure: { $0.limits.maxInFlight = 2 }) { relay in
                let client = relay.client("circl")
                _ = try await client.registerDevice(registration(user: "ada", token: randomToken()))
                let results = try await withThrowingTaskGroup(of: Bool.self) { group in
                    for index in 0..<40 {
                        group.addTask {
                            if index.isMultiple(of: 2) {
                                return try await client.listDevices(userID: "ada").devices.count == 1
                            }
                            return try await client.send(circlMessage(to: ["ada"])).job.delivered == 1
                        }
                    }
                    var collected: [Bool] = []
                    for try await result in group { collected.append(result) }
                    return collected
                }
                #expect(results.count == 40)
                #expect(results.allSatisfy { $0 })
                await client.close()
            }
        }

        @Test func aCredentialOverItsRequestLimitIsRateLimitedWithARetryAfter() async throws {
            // A burst of 5, then one a second: twenty requests in a row meet the limit even on a machine slow enough
            // to take 200 ms a request.
            try await RelayHarness.with(requestsPerSecond: 1, requestBurst: 5) { relay in
                let client = relay.client("circl")
                var codes: [Pushrelay_V1_ErrorCode?] = []
                var retryAfter: UInt32 = 0
                for _ in 0..<20 {
                    do throws(PushRelayClientError) {
                        _ = try await client.notificationTypes()
                        codes.append(nil)
                    } catch {
                        if let refusal = error.relayError {
                            codes.append(refusal.code)
                            retryAfter = max(retryAfter, refusal.retryAfterMilliseconds)
                        }
                    }
                }
                // A burst of 5 passes, the rest of the 20 quick requests are refused with a retry-after.
                #expect(codes.prefix(5).allSatisfy { $0 == nil })
                #expect(codes.contains(.rateLimited))
                #expect(codes.allSatisfy { $0 == nil || $0 == .rateLimited })
                #expect(retryAfter > 0 && retryAfter <= 1_000)
                // Another credential (another tenant) is not limited by it.
                let family = relay.client("familyportal")
                #expect(try await family.listDevices(userID: "mum", limit: 10).devices.isEmpty)
                try await Task.sleep(for: .milliseconds(Int(retryAfter) + 50))
                #expect(try await client.notificationTypes().types.isEmpty == false)
                await client.close()
                await family.close()
            }
        }

        @Test func seededRandomFramesNeverCrashOrWedgeTheRelay() async throws {
            try await RelayHarness.with { relay in
                var generator = SeededGenerator(seed: 20_261_121)
                let kinds: [UInt16] = FrameKind.requests.map(\.rawValue) + [0, 0x8001, 0x4040, 0xFFFF, 0x3FFF]
                for round in 0..<40 {
                    let connection = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                    if round.isMultiple(of: 2) {
                        _ = try await connection.hello(tenant: "circl", credential: relay.credentials["circl"]!)
                    }
                    var bytes: [UInt8] = []
                    for _ in 0..<50 {
                        let length = Int.random(in: 0...64, using: &generator)
                        let body = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
                        let flags: UInt8 =
                            Bool.random(using: &generator) ? 0 : UInt8.random(in: 0...3, using: &generator)
                        let kind = kinds.randomElement(using: &generator)!
                        bytes +=
                            frameHeader(
                                length: UInt32(length), flags: flags, kind: kind,
                                requestID: UInt32.random(in: 1...1_000, using: &generator)
                            ) + body
                    }
                    // Now and then, flip random bytes of the stream itself (lengths included).
                    if round.isMultiple(of: 3) {
                        for _ in 0..<5 { bytes[Int.random(in: 0..<bytes.count, using: &generator)] ^= 0xFF }
                    }
                    try? await connection.send(bytes)
                    try? await Task.sleep(for: .milliseconds(20))
                    await connection.close()
                }
                let client = relay.client("circl")
                #expect(try await client.ping(nonce: 9) == 9)
                await client.close()
            }
        }
    }
}

/// A deterministic random number generator (SplitMix64) so a failing fuzz round can be replayed.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
