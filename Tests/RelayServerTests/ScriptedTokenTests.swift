import APNsSimulator
import PushRelayProtocol
import Testing

extension RelayServerSuites {
    /// "Testing your client" (Protocol/README.md): with scripted tokens on, as under `serve --apns-simulator`, a
    /// token's first eight hex digits choose its outcome.
    @Suite struct ScriptedTokenTests {
        @Test("scripted tokens give dead_token, rejected and waiting; other tokens are delivered")
        func eachScriptedTokenGivesItsOutcome() async throws {
            try await RelayHarness.with { relay in
                relay.simulator.updateFaults { $0.scriptedTokens = true }
                let client = relay.client("circl")
                func token(_ prefix: String) -> String { prefix + String(randomToken().dropFirst(prefix.count)) }
                let tokens = [
                    "dead": token("deaddead"), "bad": token("bad0bad0"), "large": token("04130413"),
                    "busy": token("05030503"), "plain": randomToken(),
                ]
                for (user, token) in tokens {
                    _ = try await client.registerDevice(registration(user: user, token: token))
                }
                let result = try await client.send(circlMessage(to: Array(tokens.keys)))
                let byUser = Dictionary(result.outcomes.map { ($0.userID, $0) }, uniquingKeysWith: { a, _ in a })
                #expect(byUser["dead"]?.outcome == "dead_token" && byUser["dead"]?.reason == "Unregistered")
                #expect(byUser["bad"]?.outcome == "dead_token" && byUser["bad"]?.reason == "BadDeviceToken")
                #expect(byUser["large"]?.outcome == "rejected" && byUser["large"]?.reason == "PayloadTooLarge")
                #expect(byUser["busy"]?.outcome == "waiting")
                #expect(byUser["plain"]?.outcome == "delivered")
                // The dead token's device is deactivated, as after Apple's 410.
                #expect(try await client.listDevices(userID: "dead").devices.allSatisfy { !$0.active })
                await client.close()
            }
        }
    }
}
