import NIOCore
import PushRelayProtocol
import SwiftProtobuf
import Testing

extension RelayServerSuites {
    /// How a connection ends when the client ends it: every committed request is answered, frames after GOODBYE
    /// are answered SHUTTING_DOWN, and a GOODBYE closes the connection even when it is refused.
    @Suite struct ConnectionEndTests {
        /// Connects and says HELLO as circl.
        private func connect(_ relay: RelayHarness) async throws -> RawConnection {
            let connection = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
            let ok = try #require(await connection.hello(tenant: "circl", credential: relay.credentials["circl"]!))
            #expect(ok.kind == FrameKind.hello.answer)
            return connection
        }

        @Test("a half-closed client gets the answers to what it sent, then the relay closes")
        func halfClosedClientGetsItsAnswers() async throws {
            try await RelayHarness.with { relay in
                for wait in [false, true] {
                    let connection = try await connect(relay)
                    _ = try await relay.client("circl").registerDevice(registration(user: "ada", token: randomToken()))
                    var bytes = ByteBuffer()
                    let encoder = FrameEncoder()
                    encoder.encode(
                        kind: .send, requestID: 2, message: circlMessage(to: ["ada"], wait: wait), into: &bytes)
                    encoder.encode(kind: .ping, requestID: 3, message: Pushrelay_V1_Ping(), into: &bytes)
                    try await connection.send(bytes)
                    try await connection.closeOutput()
                    var answers: [UInt32: Frame] = [:]
                    while let frame = await connection.next() { answers[frame.requestID] = frame }
                    let sent = try #require(answers[2])
                    #expect(sent.kind == FrameKind.send.answer, "wait \(wait): \(sent.kind)")
                    let result = try sent.decode(Pushrelay_V1_SendResult.self)
                    #expect(!result.jobID.isEmpty && (!wait || result.outcomes.first?.outcome == "delivered"))
                    #expect(answers[3]?.kind == FrameKind.ping.answer)
                    // The job is the one answered: stored once.
                    let status = try await relay.client("circl").jobStatus(jobID: result.jobID)
                    #expect(status.jobID == result.jobID)
                }
            }
        }

        @Test("frames after the client's GOODBYE are answered SHUTTING_DOWN; in-flight requests are answered")
        func framesAfterGoodbyeAreAnswered() async throws {
            try await RelayHarness.with { relay in
                let connection = try await connect(relay)
                var bytes = ByteBuffer()
                let encoder = FrameEncoder()
                encoder.encode(kind: .send, requestID: 2, message: circlMessage(to: ["ada"], wait: false), into: &bytes)
                encoder.encode(kind: .goodbye, requestID: 3, message: Pushrelay_V1_Goodbye(), into: &bytes)
                encoder.encode(kind: .ping, requestID: 4, message: Pushrelay_V1_Ping(), into: &bytes)
                encoder.encode(kind: .listDevices, requestID: 5, message: Pushrelay_V1_ListDevices(), into: &bytes)
                try await connection.send(bytes)
                var answers: [UInt32: Frame] = [:]
                while let frame = await connection.next() { answers[frame.requestID] = frame }
                #expect(answers[2]?.kind == FrameKind.send.answer)
                for id: UInt32 in [4, 5] {
                    let frame = try #require(answers[id])
                    let code = try frame.decode(Pushrelay_V1_Error.self).code
                    #expect(frame.kind == .error && code == .shuttingDown, "request \(id)")
                }
            }
        }

        @Test("a refused GOODBYE is answered with its error and still closes the connection")
        func refusedGoodbyeCloses() async throws {
            try await RelayHarness.with { relay in
                let connection = try await connect(relay)
                var goodbye = Pushrelay_V1_Goodbye()
                goodbye.reason = String(repeating: "x", count: 10_000)
                try await connection.send(kind: .goodbye, requestID: 2, message: goodbye)
                let answer = try #require(await connection.next())
                #expect(answer.kind == .error && answer.requestID == 2)
                #expect(try answer.decode(Pushrelay_V1_Error.self).code == .invalidArgument)
                #expect(await connection.isClosedByRelay())
            }
        }
    }
}
