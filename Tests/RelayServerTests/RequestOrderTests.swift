import NIOCore
import PushRelayProtocol
import SwiftProtobuf
import Testing

@testable import RelayServer

extension RelayServerSuites {
    /// Pipelined requests of one connection take effect in arrival order for every later request that depends on
    /// them (``RequestOrder``), and requests that only read run side by side.
    @Suite struct RequestOrderTests {
        @Test("reads run side by side; a change waits for every earlier request, and everything waits for it")
        func theOrderOfChangesAndReads() {
            var order = RequestOrder()
            var started: [Bool] = []
            for (id, access) in [(1, .reads), (2, .reads), (3, .changes), (4, .reads), (5, .reads), (6, .changes)]
                as [(UInt32, RequestOrder.Access)]
            {
                started.append(order.arrive(id, access: access))
            }
            // A change waits for the reads before it; the reads after it wait for the change.
            #expect(started == [true, true, false, false, false, false])
            var startedLater: [[UInt32]] = []
            // An id that took effect already changes nothing (a SEND's job stored, then its answer): the second 4.
            for id: UInt32 in [2, 1, 3, 5, 4, 4, 6] { startedLater.append(order.tookEffect(id)) }
            #expect(startedLater == [[], [3], [4, 5], [], [6], [], []])
            let emptyAgain = order.count == 0
            #expect(emptyAgain && order.arrive(7, access: .changes) == true)
        }

        @Test("changes on one connection take effect one at a time, in order")
        func changesInOrder() {
            var order = RequestOrder()
            let started = [order.arrive(1, access: .changes), order.arrive(2, access: .changes)]
            let third = order.arrive(3, access: .reads)
            let afterFirst = order.tookEffect(1)
            let afterSecond = order.tookEffect(2)
            #expect(started == [true, false] && !third && afterFirst == [2] && afterSecond == [3])
        }

        @Test("what each request kind does to the state, as far as the order goes")
        func accessOfEachKind() {
            let changes: Set<RequestKind> = [
                .registerDevice, .unregisterDevice, .setPreferences, .setMute, .clearMute, .setPresence, .cancelJob,
            ]
            for kind in RequestKind.allCases {
                #expect(RequestOrder.Access(kind) == (changes.contains(kind) ? .changes : .reads), "\(kind)")
            }
        }

        /// Writes `first` and then `second` in one TCP write and returns their answers by request id.
        private func backToBack(
            _ connection: RawConnection, _ first: (FrameKind, any SwiftProtobuf.Message),
            _ second: (FrameKind, any SwiftProtobuf.Message), ids: (UInt32, UInt32)
        ) async throws -> [UInt32: Frame] {
            var bytes = ByteBuffer()
            let encoder = FrameEncoder()
            encoder.encode(kind: first.0, requestID: ids.0, message: first.1, into: &bytes)
            encoder.encode(kind: second.0, requestID: ids.1, message: second.1, into: &bytes)
            try await connection.send(bytes)
            var answers: [UInt32: Frame] = [:]
            for _ in 0..<2 {
                let frame = try #require(await connection.next())
                answers[frame.requestID] = frame
            }
            return answers
        }

        @Test("each dependent pair written back to back, 100 times: the later request sees the earlier one")
        func dependentPairsBackToBack() async throws {
            try await RelayHarness.with { relay in
                let connection = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                _ = try #require(await connection.hello(tenant: "circl", credential: relay.credentials["circl"]!))
                var nextID: UInt32 = 10
                func ids() -> (UInt32, UInt32) {
                    nextID += 2
                    return (nextID, nextID + 1)
                }
                func outcome(_ frame: Frame?) throws -> Pushrelay_V1_DeviceOutcome? {
                    let frame = try #require(frame)
                    #expect(frame.kind == FrameKind.send.answer, "\(frame.kind)")
                    return try frame.decode(Pushrelay_V1_SendResult.self).outcomes.first
                }
                for round in 0..<100 {
                    let (user, token) = ("order\(round)", randomToken())
                    // REGISTER_DEVICE, then SEND(wait) to its user: delivered to that device.
                    var pair = ids()
                    var answers = try await backToBack(
                        connection, (.registerDevice, registration(user: user, token: token)),
                        (.send, circlMessage(to: [user])), ids: pair)
                    let delivered = try outcome(answers[pair.1])
                    #expect(delivered?.token == token && delivered?.outcome == "delivered", "round \(round)")

                    // REGISTER_DEVICE, then LIST_DEVICES of its user: listed.
                    let second = randomToken()
                    var list = Pushrelay_V1_ListDevices()
                    list.userID = user
                    pair = ids()
                    answers = try await backToBack(
                        connection, (.registerDevice, registration(user: user, token: second)), (.listDevices, list),
                        ids: pair)
                    let listed = try #require(answers[pair.1]).decode(Pushrelay_V1_DeviceList.self)
                    #expect(Set(listed.devices.map(\.token)) == [token, second], "round \(round)")

                    // SET_PRESENCE in the thread, then SEND(wait) to it: skipped, active.
                    var presence = Pushrelay_V1_SetPresence()
                    presence.userID = user
                    presence.threadID = "circle-7-channel-3"
                    presence.seconds = 60
                    pair = ids()
                    answers = try await backToBack(
                        connection, (.setPresence, presence), (.send, circlMessage(to: [user])), ids: pair)
                    #expect(try outcome(answers[pair.1])?.reason == "active", "round \(round)")
                    presence.seconds = 0
                    _ = try await backToBack(
                        connection, (.setPresence, presence), (.ping, Pushrelay_V1_Ping()), ids: ids())

                    // SET_MUTE of the thread, then SEND(wait) to it: skipped, muted.
                    var mute = Pushrelay_V1_SetMute()
                    mute.userID = user
                    mute.threadID = "circle-7-channel-3"
                    pair = ids()
                    answers = try await backToBack(
                        connection, (.setMute, mute), (.send, circlMessage(to: [user])), ids: pair)
                    #expect(try outcome(answers[pair.1])?.reason == "muted", "round \(round)")
                    var clear = Pushrelay_V1_ClearMute()
                    clear.userID = user
                    clear.threadID = mute.threadID
                    _ = try await backToBack(connection, (.clearMute, clear), (.ping, Pushrelay_V1_Ping()), ids: ids())

                    // UNREGISTER_DEVICE of both (a logout), then SEND(wait) to the user: nothing delivered.
                    for removed in [token, second] {
                        var unregister = Pushrelay_V1_UnregisterDevice()
                        unregister.userID = user
                        unregister.token = removed
                        pair = ids()
                        answers = try await backToBack(
                            connection, (.unregisterDevice, unregister), (.listDevices, list), ids: pair)
                    }
                    let last = try #require(answers[pair.1]).decode(Pushrelay_V1_DeviceList.self)
                    #expect(last.devices.isEmpty, "round \(round)")
                    // Registered again (answered), then removed and sent to back to back.
                    _ = try await backToBack(
                        connection, (.registerDevice, registration(user: user, token: token)),
                        (.ping, Pushrelay_V1_Ping()), ids: ids())
                    var unregister = Pushrelay_V1_UnregisterDevice()
                    unregister.userID = user
                    unregister.token = token
                    pair = ids()
                    answers = try await backToBack(
                        connection, (.unregisterDevice, unregister), (.send, circlMessage(to: [user])), ids: pair)
                    let afterLogout = try outcome(answers[pair.1])
                    #expect(afterLogout?.outcome != "delivered" && afterLogout?.reason == "no_device", "round \(round)")
                }
                #expect(relay.requests(to: RelayHarness.deadToken).isEmpty)
                await connection.close()
            }
        }
    }
}
