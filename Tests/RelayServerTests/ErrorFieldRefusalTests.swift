import Foundation
import NIOCore
import PushRelayProtocol
import SwiftProtobuf
import Synchronization
import Testing

extension RelayServerSuites {
    /// Each code and field of Protocol/README.md's table of error fields is what a relay answers to a request that
    /// breaks its row's rule, and each refusal below is in the table: the table and the relay agree both ways.
    @Suite struct ErrorFieldRefusalTests {
        /// A request that breaks one rule, and the code and field the relay must answer it with.
        struct Refusal: Sendable, CustomStringConvertible {
            var kind: FrameKind
            var body: [UInt8]
            var code: Pushrelay_V1_ErrorCode
            var field: String

            init(
                _ kind: FrameKind, _ message: some SwiftProtobuf.Message, _ code: Pushrelay_V1_ErrorCode,
                _ field: String
            ) {
                self.kind = kind
                body = (try? message.serializedBytes()) ?? []
                self.code = code
                self.field = field
            }

            var description: String { "\(kind) \(code.name) \(field)" }
        }

        @Test func everyRowIsAnsweredWithItsCodesAndFields() async throws {
            let table = try ErrorFieldTable.load()
            let answers = Mutex<Set<Pair>>([])
            try await RelayHarness.with(configure: { $0.limits.maxRecipients = 3 }) { relay in
                let connection = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                let hello = try #require(
                    await connection.hello(tenant: "circl", credential: relay.credentials["circl"]!))
                #expect(hello.kind == FrameKind.hello.answer)
                var requestID: UInt32 = 1
                var seen: [Pair] = []
                for refusal in Self.refusals {
                    requestID += 1
                    try await connection.send(
                        ByteBuffer(bytes: Self.frame(refusal.kind, requestID: requestID, body: refusal.body)))
                    seen.append(try await Self.error(from: connection, answering: refusal))
                }
                // A request on request id 0, answered on request id 0.
                try await connection.send(ByteBuffer(bytes: Self.frame(.ping, requestID: 0, body: [])))
                seen.append(
                    try await Self.error(
                        from: connection, answering: Refusal(.ping, Pushrelay_V1_Ping(), .invalidArgument, "request_id")
                    ))
                // The 17th subscription of a connection.
                for id in 1_000..<1_016 {
                    try await connection.send(
                        kind: .subscribeResults, requestID: UInt32(id), message: Pushrelay_V1_SubscribeResults())
                    #expect(await connection.next()?.kind == FrameKind.subscribeResults.answer)
                }
                let seventeenth = Refusal(
                    .subscribeResults, Pushrelay_V1_SubscribeResults(), .invalidArgument, "subscribe_results")
                try await connection.send(ByteBuffer(bytes: Self.frame(.subscribeResults, requestID: 1_016, body: [])))
                seen.append(try await Self.error(from: connection, answering: seventeenth))
                // A GOODBYE refused for its reason is answered, then the connection closes.
                let goodbye = Refusal(
                    .goodbye, Self.with(Pushrelay_V1_Goodbye()) { $0.reason = Self.nul }, .invalidArgument,
                    "goodbye.reason")
                try await connection.send(ByteBuffer(bytes: Self.frame(.goodbye, requestID: 2_000, body: goodbye.body)))
                seen.append(try await Self.error(from: connection, answering: goodbye))
                await connection.close()
                // A HELLO's own field, before the connection has one.
                let fresh = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                var badName = Pushrelay_V1_Hello()
                badName.minVersion = 1
                badName.maxVersion = 1
                badName.tenant = "circl"
                badName.credential = relay.credentials["circl"]!
                badName.clientName = "backend\nforged"
                try await fresh.send(kind: .hello, requestID: 1, message: badName)
                seen.append(
                    try await Self.error(
                        from: fresh, answering: Refusal(.hello, badName, .invalidArgument, "hello.client_name")))
                await fresh.close()
                answers.withLock { $0.formUnion(seen) }
            }
            let answered = answers.withLock { $0 }
            // Every answer is a pair of the table, and every pair of the table was answered (`<request>`, a refusal
            // of PostgreSQL that no rule caught, is shown by ErrorFieldTableTests; a request id reused while in
            // flight by HostileClientTests.aRequestIDInFlightAgainIsRefusedOnRequestIDZero).
            var promised = table.pairs
            promised.remove(Pair(code: "INVALID_ARGUMENT", field: "<request>"))
            promised.remove(Pair(code: "DUPLICATE_REQUEST_ID", field: "request_id"))
            for pair in answered {
                let entry = Self.entry(for: pair, in: table)
                #expect(promised.contains(entry), "the relay answers \(pair), which the table lacks")
            }
            let covered = Set(answered.map { Self.entry(for: $0, in: table) })
            for pair in promised.subtracting(covered).sorted(by: { $0.description < $1.description }) {
                Issue.record("the table promises \(pair), which no refusal here shows")
            }
        }

        /// The table's pair for an answered one: its field itself, or the table's name with a placeholder for it.
        static func entry(for pair: Pair, in table: ErrorFieldTable) -> Pair {
            if table.fields.contains(pair.field) { return pair }
            return Pair(code: pair.code, field: table.entry(for: pair.field) ?? pair.field)
        }

        static func frame(_ kind: FrameKind, requestID: UInt32, body: [UInt8]) -> [UInt8] {
            func bytes<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
                withUnsafeBytes(of: value.bigEndian) { Array($0) }
            }
            return bytes(UInt32(body.count)) + [1, 0] + bytes(kind.rawValue) + bytes(requestID) + body
        }

        /// The ERROR the relay answers `refusal` with, checked against its code and field, as a pair.
        static func error(from connection: RawConnection, answering refusal: Refusal) async throws -> Pair {
            let frame = try #require(await connection.next(), "\(refusal): no answer")
            #expect(frame.kind == .error, "\(refusal): answered \(frame.kind)")
            let error = try frame.decode(Pushrelay_V1_Error.self)
            #expect(error.code == refusal.code && error.field == refusal.field, "\(refusal): \(ProtocolError(error))")
            return Pair(code: error.code.name, field: error.field)
        }

        static func with<M>(_ message: M, _ change: (inout M) -> Void) -> M {
            var copy = message
            change(&copy)
            return copy
        }

        static let nul = "a\u{0}b"
        static let long = String(repeating: "a", count: 201)
        static let unknownJob = "0195b4ba-8d3a-7f13-8b0c-5a8f9b0e2c11"
        static let register = registration(user: "ada", token: String(repeating: "ab", count: 32))
        static let send = with(Pushrelay_V1_Send()) {
            $0.notificationType = "announcement"
            $0.userIds = ["ada"]
            $0.alert.title = "News"
        }
        static let target = with(Pushrelay_V1_TokenTarget()) { $0.token = String(repeating: "ab", count: 32) }
        static let byJob = with(Pushrelay_V1_QueryDeliveries()) { $0.jobID = unknownJob }
        static let mute = with(Pushrelay_V1_SetMute()) {
            $0.userID = "ada"
            $0.threadID = "circle-1"
        }
        static let clear = with(Pushrelay_V1_ClearMute()) {
            $0.userID = "ada"
            $0.threadID = "circle-1"
        }
        static let presence = with(Pushrelay_V1_SetPresence()) {
            $0.userID = "ada"
            $0.threadID = "circle-1"
            $0.seconds = 60
        }

        static func preferences(_ type: String, enabled: Bool) -> Pushrelay_V1_SetPreferences {
            with(Pushrelay_V1_SetPreferences()) {
                $0.userID = "ada"
                $0.preferences = [
                    with(Pushrelay_V1_TypePreference()) {
                        $0.notificationType = type
                        $0.enabled = enabled
                    }
                ]
            }
        }

        /// One refusal for each code and field of the table (on circl, whose relay allows 3 recipients a send).
        static let refusals: [Refusal] =
            deviceRefusals + sendRefusals + alertRefusals + jobRefusals + queryRefusals + policyRefusals

        static let deviceRefusals: [Refusal] = [
            Refusal(.registerDevice, with(register) { $0.userID = "" }, .invalidArgument, "register_device.user_id"),
            Refusal(.registerDevice, with(register) { $0.token = "zz" }, .invalidArgument, "register_device.token"),
            Refusal(
                .registerDevice, with(register) { $0.provider = "Not A Name" }, .invalidArgument,
                "register_device.provider"),
            Refusal(
                .registerDevice, with(register) { $0.provider = "webpush" }, .invalidArgument,
                "register_device.provider"),
            Refusal(
                .registerDevice, with(register) { $0.platform = String(repeating: "i", count: 33) }, .invalidArgument,
                "register_device.platform"),
            Refusal(
                .registerDevice, with(register) { $0.environment = .unspecified }, .invalidArgument,
                "register_device.environment"),
            Refusal(
                .registerDevice, with(register) { $0.deviceID = nul }, .invalidArgument, "register_device.device_id"),
            Refusal(
                .registerDevice, with(register) { $0.appVersion = String(repeating: "1", count: 65) },
                .invalidArgument, "register_device.app_version"),
            Refusal(
                .registerDevice, with(register) { $0.locale = String(repeating: "d", count: 65) }, .invalidArgument,
                "register_device.locale"),
            Refusal(
                .registerDevice, with(register) { $0.timeZone = "GMT+5" }, .invalidArgument, "register_device.time_zone"
            ),
            // circl has no subscription topics.
            Refusal(
                .registerDevice, with(register) { $0.topics = ["chat"] }, .invalidArgument, "register_device.topics"),
            Refusal(
                .unregisterDevice, with(Pushrelay_V1_UnregisterDevice()) { $0.token = "z z" }, .invalidArgument,
                "unregister_device.token"),
            Refusal(.unregisterDevice, Pushrelay_V1_UnregisterDevice(), .invalidArgument, "unregister_device.user_id"),
            Refusal(
                .unregisterDevice, with(Pushrelay_V1_UnregisterDevice()) { $0.userID = "ada" }, .invalidArgument,
                "unregister_device.platform"),
            Refusal(.listDevices, Pushrelay_V1_ListDevices(), .invalidArgument, "list_devices.user_id"),
            Refusal(
                .listDevices,
                with(Pushrelay_V1_ListDevices()) {
                    $0.userID = "ada"
                    $0.limit = 1_001
                }, .invalidArgument, "list_devices.limit"),
            // Base64url, but no cursor the relay gave.
            Refusal(
                .listDevices,
                with(Pushrelay_V1_ListDevices()) {
                    $0.userID = "ada"
                    $0.cursor = "AAAA"
                }, .invalidArgument, "list_devices.cursor"),
        ]

        static let sendRefusals: [Refusal] = [
            Refusal(.send, with(send) { $0.userIds = [] }, .invalidArgument, "send"),
            // A payload over APNs' 4 KiB.
            Refusal(
                .send, with(send) { $0.alert.body = String(repeating: "a", count: 5_000) }, .invalidArgument, "send"),
            Refusal(.send, with(send) { $0.notificationType = "nope" }, .invalidArgument, "send.notification_type"),
            Refusal(.send, with(send) { $0.userIds = ["a", "b", "c", "d"] }, .tooManyRecipients, "send.user_ids"),
            Refusal(.send, with(send) { $0.userIds = [nul] }, .invalidArgument, "send.user_ids"),
            Refusal(
                .send,
                with(send) {
                    $0.userIds = []
                    $0.tokens = Array(repeating: target, count: 4)
                }, .tooManyRecipients, "send.tokens"),
            Refusal(
                .send,
                with(send) {
                    $0.userIds = []
                    $0.tokens = [with(target) { $0.token = "z z" }]
                }, .invalidArgument, "send.tokens"),
            Refusal(
                .send, with(send) { $0.excludeUserIds = ["a", "b", "c", "d"] }, .tooManyRecipients,
                "send.exclude_user_ids"),
            Refusal(.send, with(send) { $0.excludeUserIds = [""] }, .invalidArgument, "send.exclude_user_ids"),
            // circl has no subscription topics.
            Refusal(
                .send,
                with(send) {
                    $0.userIds = []
                    $0.topic = "news"
                }, .invalidArgument, "send.topic"),
            Refusal(.send, with(send) { $0.idempotencyKey = nul }, .invalidArgument, "send.idempotency_key"),
            Refusal(.send, with(send) { $0.sound = nul }, .invalidArgument, "send.sound"),
            Refusal(.send, with(send) { $0.threadID = nul }, .invalidArgument, "send.thread_id"),
            Refusal(.send, with(send) { $0.category = nul }, .invalidArgument, "send.category"),
            Refusal(.send, with(send) { $0.scope = nul }, .invalidArgument, "send.scope"),
            Refusal(.send, with(send) { $0.interruptionLevel = "loud" }, .invalidArgument, "send.interruption_level"),
            Refusal(.send, with(send) { $0.customJson = "[1]" }, .invalidArgument, "send.custom_json"),
            Refusal(.send, with(send) { $0.templateValues = ["": "7"] }, .invalidArgument, "send.template_values"),
            // message's thread-id template is circle-{circle_id}-channel-{channel_id}.
            Refusal(
                .send, with(send) { $0.notificationType = "message" }, .invalidArgument,
                "send.template_values.circle_id"),
            Refusal(
                .send, with(send) { $0.collapseID = String(repeating: "c", count: 65) }, .invalidArgument,
                "send.collapse_id"),
            Refusal(.send, with(send) { $0.expiration = 253_402_300_800 }, .invalidArgument, "send.expiration"),
            Refusal(.send, with(send) { $0.priority = 7 }, .invalidArgument, "send.priority"),
            Refusal(.send, with(send) { $0.relevanceScore = 2 }, .invalidArgument, "send.relevance_score"),
            Refusal(.send, with(send) { $0.sendAtMs = 1 }, .invalidArgument, "send.send_at_ms"),
            Refusal(.send, with(send) { $0.sendAtLocal = "2026-02-31T00:00" }, .invalidArgument, "send.send_at_local"),
        ]

        static let alertRefusals: [Refusal] = [
            Refusal(.send, with(send) { $0.alert.title = nul }, .invalidArgument, "send.alert.title"),
            Refusal(.send, with(send) { $0.alert.subtitle = nul }, .invalidArgument, "send.alert.subtitle"),
            Refusal(.send, with(send) { $0.alert.body = nul }, .invalidArgument, "send.alert.body"),
            Refusal(.send, with(send) { $0.alert.launchImage = nul }, .invalidArgument, "send.alert.launch_image"),
            Refusal(.send, with(send) { $0.alert.titleLocKey = nul }, .invalidArgument, "send.alert.title_loc_key"),
            Refusal(
                .send, with(send) { $0.alert.subtitleLocKey = nul }, .invalidArgument, "send.alert.subtitle_loc_key"),
            Refusal(.send, with(send) { $0.alert.locKey = nul }, .invalidArgument, "send.alert.loc_key"),
            Refusal(.send, with(send) { $0.alert.titleLocArgs = [nul] }, .invalidArgument, "send.alert.title_loc_args"),
            Refusal(
                .send, with(send) { $0.alert.subtitleLocArgs = [nul] }, .invalidArgument,
                "send.alert.subtitle_loc_args"),
            Refusal(.send, with(send) { $0.alert.locArgs = [nul] }, .invalidArgument, "send.alert.loc_args"),
        ]

        static let jobRefusals: [Refusal] = [
            Refusal(.jobStatus, Pushrelay_V1_JobStatus(), .invalidArgument, "job_status.job_id"),
            Refusal(
                .jobStatus, with(Pushrelay_V1_JobStatus()) { $0.jobID = unknownJob }, .notFound, "job_status.job_id"),
            Refusal(.cancelJob, Pushrelay_V1_CancelJob(), .invalidArgument, "cancel_job.job_id"),
            Refusal(
                .cancelJob, with(Pushrelay_V1_CancelJob()) { $0.jobID = unknownJob }, .notFound, "cancel_job.job_id"),
            Refusal(
                .unsubscribeResults, with(Pushrelay_V1_UnsubscribeResults()) { $0.subscriptionRequestID = 4_242 },
                .notFound, "unsubscribe_results.subscription_request_id"),
        ]

        static let queryRefusals: [Refusal] = [
            Refusal(.queryDeliveries, Pushrelay_V1_QueryDeliveries(), .invalidArgument, "query_deliveries"),
            Refusal(.queryDeliveries, with(byJob) { $0.jobID = nul }, .invalidArgument, "query_deliveries.job_id"),
            Refusal(
                .queryDeliveries, with(Pushrelay_V1_QueryDeliveries()) { $0.userID = long }, .invalidArgument,
                "query_deliveries.user_id"),
            Refusal(
                .queryDeliveries, with(Pushrelay_V1_QueryDeliveries()) { $0.token = "z z" }, .invalidArgument,
                "query_deliveries.token"),
            Refusal(
                .queryDeliveries, with(Pushrelay_V1_QueryDeliveries()) { $0.fromMs = -1 }, .invalidArgument,
                "query_deliveries.from_ms"),
            Refusal(
                .queryDeliveries,
                with(Pushrelay_V1_QueryDeliveries()) {
                    $0.fromMs = 5
                    $0.toMs = 5
                }, .invalidArgument, "query_deliveries.to_ms"),
            Refusal(.queryDeliveries, with(byJob) { $0.limit = 1_001 }, .invalidArgument, "query_deliveries.limit"),
            Refusal(.queryDeliveries, with(byJob) { $0.cursor = "AAAA" }, .invalidArgument, "query_deliveries.cursor"),
        ]

        static let policyRefusals: [Refusal] = [
            Refusal(
                .setPreferences, with(preferences("announcement", enabled: false)) { $0.userID = "" },
                .invalidArgument, "set_preferences.user_id"),
            Refusal(
                .setPreferences,
                with(preferences("announcement", enabled: false)) {
                    $0.preferences = Array(repeating: $0.preferences[0], count: 257)
                }, .invalidArgument, "set_preferences.preferences"),
            Refusal(
                .setPreferences, preferences("nope", enabled: false), .invalidArgument,
                "set_preferences.preferences.notification_type"),
            // circl's silent_refresh may not be turned off.
            Refusal(
                .setPreferences, preferences("silent_refresh", enabled: false), .invalidArgument,
                "set_preferences.preferences.enabled"),
            Refusal(.getPreferences, Pushrelay_V1_GetPreferences(), .invalidArgument, "get_preferences.user_id"),
            Refusal(.listMutes, Pushrelay_V1_ListMutes(), .invalidArgument, "list_mutes.user_id"),
            Refusal(.setMute, with(mute) { $0.userID = "" }, .invalidArgument, "set_mute.user_id"),
            Refusal(.setMute, with(mute) { $0.threadID = nul }, .invalidArgument, "set_mute.thread_id"),
            Refusal(.setMute, with(mute) { $0.scope = long }, .invalidArgument, "set_mute.scope"),
            Refusal(.setMute, with(mute) { $0.untilMs = -1 }, .invalidArgument, "set_mute.until_ms"),
            Refusal(.setMute, with(mute) { $0.threadID = "" }, .invalidArgument, "set_mute"),
            Refusal(.setMute, with(mute) { $0.scope = "circle-1" }, .invalidArgument, "set_mute"),
            Refusal(.clearMute, with(clear) { $0.userID = "" }, .invalidArgument, "clear_mute.user_id"),
            Refusal(.clearMute, with(clear) { $0.threadID = nul }, .invalidArgument, "clear_mute.thread_id"),
            Refusal(.clearMute, with(clear) { $0.scope = nul }, .invalidArgument, "clear_mute.scope"),
            Refusal(.clearMute, with(clear) { $0.threadID = "" }, .invalidArgument, "clear_mute"),
            Refusal(.clearMute, with(clear) { $0.scope = "circle-1" }, .invalidArgument, "clear_mute"),
            Refusal(.setPresence, with(presence) { $0.userID = "" }, .invalidArgument, "set_presence.user_id"),
            Refusal(.setPresence, with(presence) { $0.threadID = "" }, .invalidArgument, "set_presence.thread_id"),
            Refusal(.setPresence, with(presence) { $0.seconds = 604_801 }, .invalidArgument, "set_presence.seconds"),
        ]
    }
}
