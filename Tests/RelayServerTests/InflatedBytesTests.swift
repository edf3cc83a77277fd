import Foundation
import NIOCore
import PushRelayProtocol
import SwiftProtobuf
import Synchronization
import Testing

@testable import RelayServer

/// `message`'s bytes with an undeclared field (number 1000) of `padding` bytes appended: 2 KiB of random bytes, then
/// zeros, so that zstd shrinks the body about a hundred times, within the 256 times a body may inflate.
func padded(_ message: some SwiftProtobuf.Message, by padding: Int) -> [UInt8] {
    let random = (0..<min(2_048, padding)).map { _ in UInt8.random(in: 0...255) }
    let value = random + [UInt8](repeating: 0, count: padding - random.count)
    var length: [UInt8] = []
    var rest = UInt64(value.count)
    while rest >= 0x80 {
        length.append(UInt8(truncatingIfNeeded: rest) | 0x80)
        rest >>= 7
    }
    length.append(UInt8(rest))
    // Field 1000, wire type 2: tag 8002 as a varint.
    return ((try? message.serializedBytes()) ?? []) + [0xC2, 0x3E] + length + value
}

/// A frame of `kind` carrying `body` zstd-compressed.
func compressedFrame(kind: FrameKind, requestID: UInt32, body: [UInt8]) -> ByteBuffer {
    var buffer = ByteBuffer()
    FrameEncoder(compressionThreshold: 0).encode(kind: kind, requestID: requestID, body: body, into: &buffer)
    return buffer
}

/// A count that tasks add to.
final class Tally: Sendable {
    private let value = Atomic<Int>(0)

    /// The count now.
    var count: Int { value.load(ordering: .relaxed) }

    /// Adds one.
    func add() { value.wrappingAdd(1, ordering: .relaxed) }
}

/// The most `sample` returned while `body` ran, sampled every 5 ms.
func largest(_ sample: @escaping @Sendable () -> Int, during body: () async throws -> Void) async rethrows -> Int {
    let sampler = Task {
        var largest = 0
        while !Task.isCancelled {
            largest = max(largest, sample())
            try? await Task.sleep(for: .milliseconds(5))
        }
        return max(largest, sample())
    }
    try await body()
    sampler.cancel()
    return await sampler.value
}

extension RelayServerSuites {
    /// A connection's requests hold their bodies' inflated bytes until answered, within a per-connection budget and a
    /// process-wide one; the relay reads no more of a connection over either. Bodies are charged to the rate limit by
    /// their inflated size before they are decompressed, PINGs too; before HELLO a frame is at most 16 KiB.
    @Suite struct InflatedBytesTests {
        /// A body of about 240 KiB once inflated, 2 KiB as sent: four fit in 1 MiB, five do not.
        static let paddedBytes = 240 << 10

        /// A relay whose sends wait `latency` for APNs, with `configure`d budgets, and a device for ada.
        static func withSlowAPNs(
            latency: TimeAmount = .milliseconds(1_500),
            configure: @escaping (inout RelayListenerConfiguration) -> Void,
            _ body: @Sendable (RelayHarness) async throws -> Void
        ) async throws {
            try await RelayHarness.with(configure: configure) { relay in
                let client = relay.client("circl")
                _ = try await client.registerDevice(registration(user: "ada", token: randomToken()))
                await client.close()
                relay.simulator.updateFaults { $0.latency = latency }
                try await body(relay)
            }
        }

        /// `count` SEND(wait) frames to ada from request id `firstID` on, each padded to ``paddedBytes`` and
        /// compressed, then a PING (request id 999).
        static func pipeline(_ count: Int, firstID: UInt32 = 10) -> ByteBuffer {
            var stream = ByteBuffer()
            for id in firstID..<firstID + UInt32(count) {
                var frame = compressedFrame(
                    kind: .send, requestID: id, body: padded(circlMessage(to: ["ada"]), by: paddedBytes))
                #expect(FrameHeader.peek(frame)?.flags == .zstd && frame.readableBytes < 4_096)
                stream.writeBuffer(&frame)
            }
            stream.writeImmutableBuffer(FrameEncoder().frame(kind: .ping, requestID: 999, message: Pushrelay_V1_Ping()))
            return stream
        }

        @Test func aConnectionHoldsAtMostItsBudgetOfInflatedBodiesAndIsNotReadBeyondIt() async throws {
            let budget = 1 << 20
            try await Self.withSlowAPNs(configure: {
                $0.limits.maxDecompressedBytes = 256 << 10
                $0.maximumInflightBytesPerConnection = budget
            }) { relay in
                let connection = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                _ = try #require(await connection.hello(tenant: "circl", credential: relay.credentials["circl"]!))
                let server = relay.listener
                var answers: [Frame] = []
                let held = try await largest({ server.inflightBodyBytes }) {
                    try await connection.send(Self.pipeline(12))
                    for _ in 0..<13 {
                        if let frame = await connection.next() { answers.append(frame) }
                    }
                }
                // Four bodies at once, never five: 12 frames of 2 KiB would otherwise hold 2.9 MiB.
                #expect(held <= budget, "held \(held) bytes")
                #expect(held >= 3 * Self.paddedBytes, "held \(held) bytes")
                #expect(answers.count == 13)
                #expect(answers.filter { $0.kind == FrameKind.send.answer }.count == 12)
                // The PING behind the frames that waited was read only once eight answers had given bytes back.
                let pong = try #require(answers.firstIndex { $0.kind == FrameKind.ping.answer })
                #expect(pong >= 8, "the PING was answered after \(pong) sends")
                #expect(await eventually { server.inflightBodyBytes == 0 })
                await connection.close()
            }
        }

        @Test func allConnectionsTogetherHoldAtMostTheProcessBudgetAndSmallRequestsStillPass() async throws {
            let budget = 1 << 20
            try await Self.withSlowAPNs(configure: {
                $0.limits.maxDecompressedBytes = 256 << 10
                $0.maximumInflightBytes = budget
            }) { relay in
                let credential = relay.credentials["circl"]!
                let flooders = [
                    try await RawConnection.connect(port: relay.listener.port, group: relay.group),
                    try await RawConnection.connect(port: relay.listener.port, group: relay.group),
                ]
                for flooder in flooders {
                    _ = try #require(await flooder.hello(tenant: "circl", credential: credential))
                }
                let server = relay.listener
                let answered = Tally()
                let held = try await largest({ server.inflightBodyBytes }) {
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for flooder in flooders {
                            group.addTask {
                                try await flooder.send(Self.pipeline(6))
                                for _ in 0..<7 {
                                    if await flooder.next() != nil { answered.add() }
                                }
                            }
                        }
                        // While the budget is taken, a small request of a third connection passes (the 64 KiB
                        // every connection may hold whatever the others do).
                        try await Task.sleep(for: .milliseconds(300))
                        let other = relay.client("circl")
                        let small = try await other.send(circlMessage(to: ["ada"], wait: false))
                        #expect(!small.jobID.isEmpty)
                        #expect(answered.count < 10, "the floods were nearly done")
                        await other.close()
                        try await group.waitForAll()
                    }
                }
                #expect(held <= budget + ConnectionBounds.assuredInflightBytes, "held \(held) bytes")
                #expect(held >= 3 * Self.paddedBytes, "held \(held) bytes")
                #expect(answered.count == 14)
                #expect(await eventually { server.inflightBodyBytes == 0 })
                for flooder in flooders { await flooder.close() }
            }
        }

        @Test func theProcessBudgetTakesWhatFitsWaitsForTheRestAndWakesOnRelease() {
            let budget = InflatedBytesBudget(limit: 1_000_000)
            let woken = Tally()
            let wake: @Sendable () -> Void = { woken.add() }
            #expect(budget.take(2_000_000, connectionHeld: 0, wake: wake), "nothing held: one request is taken")
            #expect(!budget.take(500_000, connectionHeld: 0, wake: wake))
            #expect(budget.take(65_536, connectionHeld: 0, wake: wake), "the assured bytes of a connection")
            #expect(!budget.take(1, connectionHeld: 65_536, wake: wake))
            #expect(budget.held == 2_065_536 && woken.count == 0)
            budget.release(2_000_000)
            #expect(woken.count == 2)
            #expect(budget.take(500_000, connectionHeld: 0, wake: wake))
            budget.release(565_536)
            #expect(budget.held == 0 && woken.count == 2)
        }

        @Test func aPingPaysForItsInflatedBodyAndAFloodIsToldOnceThenNotRead() async throws {
            try await RelayHarness.with(requestsPerSecond: 20, requestBurst: 6) { relay in
                let connection = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                _ = try #require(await connection.hello(tenant: "circl", credential: relay.credentials["circl"]!))
                var ping = Pushrelay_V1_Ping()
                ping.nonce = 5
                // 128 KiB once inflated: three tokens each (one, and two for the body), from a burst of six.
                let heavy = padded(ping, by: 128 << 10)
                for id: UInt32 in 1...2 {
                    try await connection.send(compressedFrame(kind: .ping, requestID: id, body: heavy))
                    #expect(await connection.next()?.kind == FrameKind.ping.answer)
                }
                // 50 small PINGs at once, a token each, with none left: the first is answered RATE_LIMITED, the
                // rest are not read until the wait it was told has passed, then answered as tokens come back. Without
                // the pause every one of them would be answered RATE_LIMITED.
                var flood = ByteBuffer()
                for id: UInt32 in 3..<53 {
                    FrameEncoder().encode(kind: .ping, requestID: id, message: ping, into: &flood)
                }
                try await connection.send(flood)
                var limited: [UInt32] = []
                var pongs = 0
                for _ in 0..<50 {
                    let answer = try #require(await connection.next())
                    if answer.kind == .error {
                        #expect(try answer.decode(Pushrelay_V1_Error.self).code == .rateLimited)
                        limited.append(answer.requestID)
                    } else {
                        #expect(answer.kind == FrameKind.ping.answer)
                        pongs += 1
                    }
                }
                #expect(limited.first == 3)
                #expect(limited.count <= 3 && pongs == 50 - limited.count, "RATE_LIMITED: \(limited)")
                await connection.close()
            }
        }

        @Test func beforeHelloAFrameIsAtMost16KiBAsSentAndInflated() async throws {
            try await RelayHarness.with { relay in
                let connection = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                let inflating = compressedFrame(
                    kind: .hello, requestID: 1, body: padded(Pushrelay_V1_Hello(), by: 20_000))
                #expect(FrameHeader.peek(inflating)?.flags == .zstd)
                try await connection.send(inflating)
                #expect(await connection.nextError() == .decompressedTooLarge)
                // The connection goes on: a HELLO is taken.
                let ok = try #require(await connection.hello(tenant: "circl", credential: relay.credentials["circl"]!))
                #expect(ok.kind == FrameKind.hello.answer)
                await connection.close()
                // 20 KB as sent before HELLO breaks the framing: the connection closes.
                let large = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                var body = ByteBuffer()
                FrameEncoder().encode(
                    kind: .ping, requestID: 2, body: padded(Pushrelay_V1_Ping(), by: 20_000), into: &body)
                try await large.send(body)
                let fatal = try #require(await large.next())
                #expect(try fatal.requestID == 0 && fatal.decode(Pushrelay_V1_Error.self).code == .frameTooLarge)
                #expect(await large.isClosedByRelay())
                await large.close()
            }
        }

        @Test func aSendOfHalfAMillionEmptyLocArgsIsRefusedByItsCountAndTheRelayServesOn() async throws {
            try await RelayHarness.with { relay in
                let connection = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                _ = try #require(await connection.hello(tenant: "circl", credential: relay.credentials["circl"]!))
                var send = circlMessage(to: ["ada"])
                send.alert.locArgs = [""]
                // One empty loc_args is 2 bytes, [0x52, 0x00], inside the alert: repeat it in the alert's bytes.
                var alert = (try? send.alert.serializedBytes() as [UInt8]) ?? []
                for _ in 0..<500_000 { alert += [0x52, 0x00] }
                send.clearAlert()
                var length: [UInt8] = []
                var rest = UInt64(alert.count)
                while rest >= 0x80 {
                    length.append(UInt8(truncatingIfNeeded: rest) | 0x80)
                    rest >>= 7
                }
                length.append(UInt8(rest))
                let body = ((try? send.serializedBytes() as [UInt8]) ?? []) + [0x3A] + length + alert
                var plain = ByteBuffer()
                FrameEncoder().encode(kind: .send, requestID: 2, body: body, into: &plain)
                #expect(plain.readableBytes < 1 << 20)
                try await connection.send(plain)
                let answer = try #require(await connection.next())
                let error = try answer.decode(Pushrelay_V1_Error.self)
                #expect(error.code == .invalidArgument && error.field == "send.alert.loc_args")
                // Compressed, the same body would inflate 1,000 times its size: refused before it is decompressed.
                var compressed = ByteBuffer()
                let zstd = Zstd.compress(ByteBuffer(bytes: body), allocator: ByteBufferAllocator())
                FrameHeader(
                    length: UInt32(zstd.readableBytes), version: 1, flags: .zstd, kind: .send, requestID: 3
                ).write(to: &compressed)
                compressed.writeImmutableBuffer(zstd)
                try await connection.send(compressed)
                #expect(await connection.nextError() == .decompressedTooLarge)
                #expect(try await connection.pingWorks())
                await connection.close()
            }
        }
    }
}
