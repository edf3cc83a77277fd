import Foundation
import NIOCore
import PushRelayProtocol
import RelayServer
import RelayStore
import SwiftProtobuf
import Testing

extension RelayServerSuites {
    /// A job stores the validated request it will execute: fields the protocol does not declare, at any depth, are
    /// not stored.
    @Suite struct StoredRequestTests {
        @Test func aSendPaddedWithUnknownFieldsIsStoredWithoutThem() async throws {
            try await RelayHarness.with { relay in
                let connection = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                _ = try #require(await connection.hello(tenant: "circl", credential: relay.credentials["circl"]!))
                var send = circlMessage(to: ["ada"], wait: false)
                send.idempotencyKey = "padded"
                let known: [UInt8] = try send.serializedBytes()
                // Field 900 (length-delimited, 8 KiB) at the top level, and field 901 inside the alert (field 7, which
                // may appear once).
                let padding = Self.field(900, Array(repeating: 0x41, count: 8_192))
                var alert: [UInt8] = try send.alert.serializedBytes()
                alert += Self.field(901, Array(repeating: 0x42, count: 4_096))
                var withoutAlert = send
                withoutAlert.clearAlert()
                let body = try withoutAlert.serializedBytes() + padding + Self.field(7, alert)
                try await connection.send(
                    frameHeader(length: UInt32(body.count), kind: FrameKind.send.rawValue, requestID: 2) + body)
                let answer = try #require(await connection.next())
                #expect(answer.kind == FrameKind.send.answer)
                let result = try answer.decode(Pushrelay_V1_SendResult.self)
                let job = try #require(try await relay.store.job(tenant: "circl", id: result.jobID))
                #expect(job.request.count < known.count + 64)
                let stored = try Pushrelay_V1_Send(serializedBytes: job.request)
                #expect(stored.unknownFields.data.isEmpty && stored.alert.unknownFields.data.isEmpty)
                #expect(stored.alert.title == send.alert.title && stored.userIds == send.userIds)
                await connection.close()
            }
        }

        /// A length-delimited protobuf field `number` holding `bytes`.
        private static func field(_ number: Int, _ bytes: [UInt8]) -> [UInt8] {
            varint(UInt64(number) << 3 | 2) + varint(UInt64(bytes.count)) + bytes
        }

        private static func varint(_ value: UInt64) -> [UInt8] {
            var value = value
            var bytes: [UInt8] = []
            while value >= 0x80 {
                bytes.append(UInt8(value & 0x7F) | 0x80)
                value >>= 7
            }
            bytes.append(UInt8(value))
            return bytes
        }
    }
}
