import Foundation
import NIOCore
import PushRelayProtocol
import SwiftProtobuf
import Testing

@testable import RelayServer

/// Protocol/README.md holds one table of every `field` an ERROR names ("Field rules"); it matches the relay: every
/// name the sources write and every field of every request is in it, a field sent twice or with another wire type is
/// named, and every code and field of the table is what a relay answers to a request that breaks the row's rule.
@Suite struct ErrorFieldTableTests {
    static let limits = ProtocolLimits(maxRecipients: 3)

    @Test func theTableIsFoundWithItsCodes() throws {
        let table = try ErrorFieldTable.load()
        #expect(table.rows.count > 60)
        let codes = Set(table.rows.flatMap(\.codes))
        #expect(codes == ["INVALID_ARGUMENT", "TOO_MANY_RECIPIENTS", "NOT_FOUND", "DUPLICATE_REQUEST_ID"])
        #expect(table.pairs.contains(Pair(code: "INVALID_ARGUMENT", field: "send.template_values.<name>")))
    }

    @Test func everyFieldNameTheSourcesWriteIsInTheTable() throws {
        let table = try ErrorFieldTable.load()
        let names = try SourceFieldNames.collect()
        // The collection finds them: the literal ones, the checked ones, the request alone and a placeholder.
        #expect(names.count > 70)
        for known in [
            "request_id", "send", "send.send_at_local", "send.template_values.<name>", "set_mute", "clear_mute",
            "job_status.job_id", "unsubscribe_results.subscription_request_id", "send.alert.loc_args",
            "set_preferences.preferences.enabled", "list_devices.cursor", "subscribe_results", "send.exclude_user_ids",
        ] {
            #expect(names.contains(known), "\(known)")
        }
        for name in names.sorted() {
            #expect(table.fields.contains(name), "\(name) is answered by the relay and missing from the table")
        }
    }

    /// A request message: its kind, its wire shape and the relay's check of a body of it (`nil`: accepted).
    struct RequestKind: Sendable {
        var kind: FrameKind
        var shape: WireShape
        var verdict: @Sendable ([UInt8]) -> ProtocolError?
    }

    /// Every request message.
    static let requests: [RequestKind] = [
        request(Pushrelay_V1_Hello.self, .hello), request(Pushrelay_V1_Ping.self, .ping),
        request(Pushrelay_V1_Goodbye.self, .goodbye), request(Pushrelay_V1_RegisterDevice.self, .registerDevice),
        request(Pushrelay_V1_UnregisterDevice.self, .unregisterDevice),
        request(Pushrelay_V1_ListDevices.self, .listDevices), request(Pushrelay_V1_Send.self, .send),
        request(Pushrelay_V1_JobStatus.self, .jobStatus), request(Pushrelay_V1_CancelJob.self, .cancelJob),
        request(Pushrelay_V1_QueryDeliveries.self, .queryDeliveries),
        request(Pushrelay_V1_ListNotificationTypes.self, .listNotificationTypes),
        request(Pushrelay_V1_SetPreferences.self, .setPreferences),
        request(Pushrelay_V1_GetPreferences.self, .getPreferences), request(Pushrelay_V1_SetMute.self, .setMute),
        request(Pushrelay_V1_ClearMute.self, .clearMute), request(Pushrelay_V1_ListMutes.self, .listMutes),
        request(Pushrelay_V1_SetPresence.self, .setPresence),
        request(Pushrelay_V1_SubscribeResults.self, .subscribeResults),
        request(Pushrelay_V1_UnsubscribeResults.self, .unsubscribeResults),
    ]

    static func request<M: ValidatedRequest>(_ type: M.Type, _ kind: FrameKind) -> RequestKind {
        RequestKind(kind: kind, shape: M.wireShape(limits: limits)) { body in
            do throws(ProtocolError) {
                _ = try Frame(kind: kind, requestID: 1, body: ByteBuffer(bytes: body))
                    .request(M.self, limits: limits, nowMilliseconds: Int64(Date().timeIntervalSince1970 * 1_000))
                return nil
            } catch {
                return error
            }
        }
    }

    @Test func everyFieldOfEveryRequestIsInTheTableAndNamedWhenSentTwiceOrWithAnotherWireType() throws {
        let table = try ErrorFieldTable.load()
        #expect(Set(Self.requests.map(\.kind)) == Set(FrameKind.requests))
        var paths = 0
        for request in Self.requests {
            for chain in Self.chains(request.shape) {
                let field = chain.last!.field
                let path = request.shape.prefix + "." + chain.map(\.field.name).joined(separator: ".")
                paths += 1
                #expect(table.fields.contains(path), "\(path) is a field of a request and missing from the table")
                // Once more than its limit (twice for a field that is not repeated), with values of its type.
                let beyond = request.verdict(Self.body(chain, count: field.limit + 1, wireType: field.wireType))
                #expect(beyond?.code == field.code && beyond?.field == path, "\(path): \(String(describing: beyond))")
                // Once, with another wire type.
                let other: WireShape.WireType = field.wireType == .lengthDelimited ? .varint : .lengthDelimited
                let wrong = request.verdict(Self.body(chain, count: 1, wireType: other))
                #expect(wrong?.code == .invalidBody && wrong?.field == path, "\(path): \(String(describing: wrong))")
            }
        }
        #expect(paths > 80)
    }

    /// Each field of `shape` and of the messages in it, as the chain of fields from the top that leads to it.
    static func chains(_ shape: WireShape) -> [[(number: Int, field: WireShape.Field)]] {
        shape.fields.sorted { $0.key < $1.key }.flatMap { number, field in
            [[(number, field)]] + (field.message.map(chains) ?? []).map { [(number, field)] + $0 }
        }
    }

    /// A body holding the last field of `chain` `count` times as `wireType` (empty or zero values), inside one of
    /// each message that holds it.
    static func body(_ chain: [(number: Int, field: WireShape.Field)], count: Int, wireType: WireShape.WireType)
        -> [UInt8]
    {
        let value: [UInt8] =
            switch wireType {
            case .varint, .lengthDelimited: [0]
            case .fixed64: Array(repeating: 0, count: 8)
            case .fixed32: Array(repeating: 0, count: 4)
            }
        var bytes = Array(repeating: varint(UInt64(chain.last!.number << 3) | wireType.rawValue) + value, count: count)
            .flatMap { $0 }
        for (number, _) in chain.dropLast().reversed() {
            bytes = varint(UInt64(number << 3 | 2)) + varint(UInt64(bytes.count)) + bytes
        }
        return bytes
    }

    static func varint(_ value: UInt64) -> [UInt8] {
        var value = value
        var bytes: [UInt8] = []
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        return bytes + [UInt8(value)]
    }

    @Test func aRefusalOfTheDatabaseNamesTheRequest() throws {
        let table = try ErrorFieldTable.load()
        #expect(table.pairs.contains(Pair(code: "INVALID_ARGUMENT", field: "<request>")))
        let refused = ProtocolError(.invalidArgument, "PostgreSQL refused the request's data")
        for kind in FrameKind.requests {
            #expect(refused.namingRequest(kind).field == kind.metricName)
        }
        let named = ProtocolError.invalidArgument("set_mute.scope", "scope is at most 200 bytes")
        #expect(named.namingRequest(.setMute) == named)
        let unavailable = ProtocolError(.unavailable, "no answer")
        #expect(unavailable.namingRequest(.setMute).field == "")
    }
}
