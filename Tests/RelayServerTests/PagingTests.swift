import PushRelayClient
import PushRelayProtocol
import Testing

extension RelayServerSuites {
    /// QUERY_DELIVERIES and LIST_DEVICES over the wire: pages of `limit` and the cursor to the next.
    @Suite struct PagingTests {
        @Test func devicesAndDeliveriesArePagedCompletelyByTheirCursors() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("circl")
                let users = (0..<25).map { "user\($0)" }
                for user in users {
                    _ = try await client.registerDevice(registration(user: user, token: randomToken()))
                }
                // One user with 25 devices (its own tokens), listed 10 at a time.
                var tokens: [String] = []
                for _ in 0..<25 {
                    let token = randomToken()
                    tokens.append(token)
                    _ = try await client.registerDevice(registration(user: "ada", token: token))
                }
                var listed: [String] = []
                var cursor = ""
                var pages = 0
                repeat {
                    let page = try await client.listDevices(userID: "ada", limit: 10, cursor: cursor)
                    listed += page.devices.map(\.token)
                    cursor = page.nextCursor
                    pages += 1
                } while !cursor.isEmpty
                #expect(pages == 3 && Set(listed) == Set(tokens) && listed.count == 25)

                let sent = try await client.send(circlMessage(to: users))
                var delivered: [String] = []
                pages = 0
                repeat {
                    var query = Pushrelay_V1_QueryDeliveries()
                    query.jobID = sent.jobID
                    query.limit = 10
                    query.cursor = cursor
                    let page = try await client.queryDeliveries(query)
                    delivered += page.deliveries.map(\.userID)
                    cursor = page.nextCursor
                    pages += 1
                } while !cursor.isEmpty
                #expect(pages == 3 && Set(delivered) == Set(users) && delivered.count == 25)

                // A cursor the relay did not give is refused, naming the field.
                var forged = Pushrelay_V1_QueryDeliveries()
                forged.jobID = sent.jobID
                forged.cursor = "bm90LWEtY3Vyc29y"
                #expect(await errorCode { try await client.queryDeliveries(forged) } == .invalidArgument)
                forged.cursor = "not base64!"
                #expect(await errorCode { try await client.queryDeliveries(forged) } == .invalidArgument)
                await client.close()
            }
        }
    }
}
