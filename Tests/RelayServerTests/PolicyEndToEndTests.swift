import Foundation
import PushRelayClient
import PushRelayProtocol
import RelayServer
import Testing

extension RelayServerSuites {
    /// The recipient policy through the wire: an opted-out user is skipped with a recorded reason, a user in
    /// quiet hours is deferred, the others get it.
    @Suite struct PolicyEndToEndTests {
        /// An IANA fixed-offset zone whose local hour is `hour` now.
        static func zone(atLocalHour hour: Int) -> String {
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = TimeZone(identifier: "UTC")!
            var offset = (hour - calendar.component(.hour, from: Date()) + 24) % 24
            if offset > 12 { offset -= 24 }
            // Etc/GMT-3 is UTC+3: the sign is inverted.
            return offset == 0 ? "Etc/UTC" : offset > 0 ? "Etc/GMT-\(offset)" : "Etc/GMT+\(-offset)"
        }

        /// SET_PREFERENCES turning `type` off for `user`.
        static func optOut(_ user: String, of type: String) -> Pushrelay_V1_SetPreferences {
            var preferences = Pushrelay_V1_SetPreferences()
            preferences.userID = user
            preferences.preferences = [
                Pushrelay_V1_TypePreference.with {
                    $0.notificationType = type
                    $0.enabled = false
                }
            ]
            return preferences
        }

        /// circl's announcement to `users`, waiting for the outcomes.
        static func announcement(to users: [String]) -> Pushrelay_V1_Send {
            var send = Pushrelay_V1_Send()
            send.notificationType = "announcement"
            send.userIds = users
            send.alert.body = "The circle meets on Friday"
            send.wait = true
            return send
        }

        @Test func optedOutUsersAreSkippedAndUsersInQuietHoursDeferred() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("circl")
                let (awakeZone, nightZone) = (Self.zone(atLocalHour: 12), Self.zone(atLocalHour: 3))
                var tokens: [String: String] = [:]
                for (user, zone) in [("awake", awakeZone), ("optout", awakeZone), ("night", nightZone)] {
                    tokens[user] = randomToken()
                    var device = registration(user: user, token: tokens[user]!)
                    device.timeZone = zone
                    _ = try await client.registerDevice(device)
                }
                _ = try await client.setPreferences(Self.optOut("optout", of: "announcement"))
                let result = try await client.send(Self.announcement(to: ["awake", "optout", "night"]))
                let byUser = Dictionary(uniqueKeysWithValues: result.outcomes.map { ($0.userID, $0) })
                #expect(byUser["awake"]?.outcome == "delivered")
                #expect(byUser["optout"]?.outcome == "skipped")
                #expect(byUser["optout"]?.reason == "opted_out")
                // announcement is deferred in circl's quiet hours (23:00-07:00): sent at 07:00 in the zone.
                #expect(byUser["night"]?.outcome == "deferred" && byUser["night"]?.reason == "quiet_hours")
                #expect(relay.simulator.receivedRequests().compactMap(\.deviceToken) == [tokens["awake"]!])

                var query = Pushrelay_V1_QueryDeliveries()
                query.jobID = result.jobID
                let rows = try await client.queryDeliveries(query).deliveries
                #expect(rows.contains { $0.userID == "optout" && $0.outcome == "skipped" && $0.reason == "opted_out" })
                // The deferred device has its row while it waits, with the reason.
                #expect(
                    rows.contains { $0.userID == "night" && $0.outcome == "deferred" && $0.reason == "quiet_hours" })
                await client.close()
            }
        }

        @Test func theSwiftClientReconnectsAfterTheRelayClosesItsConnection() async throws {
            // Idle for three seconds: with 300 ms, a CI machine starting dozens of test clusters once let the
            // connection idle out between the HELLO and a ping's answer.
            try await RelayHarness.with(configure: { $0.idleTimeout = .seconds(3) }) { relay in
                let client = PushRelayClient(
                    configuration: .init(
                        host: "127.0.0.1", port: relay.listener.port, tenant: "circl",
                        credential: relay.credentials["circl"]!, reconnect: true, initialBackoff: 0.05
                    ),
                    group: relay.group
                )
                #expect(try await client.ping(nonce: 1) == 1)
                #expect(relay.listener.connectionCount == 1)
                // Idle: the relay says GOODBYE and closes the connection.
                #expect(await eventually { relay.listener.connectionCount == 0 })
                // A ping written as the relay's GOODBYE and close come may fail as closed (no answer: it may or may
                // not have been taken); the client then reconnects for the next one.
                let pong: UInt64
                do {
                    pong = try await client.ping(nonce: 2)
                } catch let error as PushRelayClientError where error.code == .connectionClosed {
                    pong = try await client.ping(nonce: 2)
                }
                #expect(pong == 2)
                #expect(relay.listener.connectionCount == 1)
                await client.close()
            }
        }
    }
}
