import PushRelayProtocol
import Testing

extension RelayServerSuites {
    /// One user id, one identity: canonically equivalent spellings (NFC and NFD) are one user everywhere, since the
    /// relay puts every id in NFC at the boundary (``IdentityNormalized``).
    @Suite struct IdentityTests {
        /// "zoë" composed (NFC) and decomposed (NFD): other bytes, one user.
        static let composed = "zo\u{EB}"
        static let decomposed = "zoe\u{308}"

        @Test("the NFC and the NFD spelling of an id are put in NFC; ASCII is left as it is")
        func idsArePutInNFC() throws {
            #expect(Array(Self.composed.utf8) != Array(Self.decomposed.utf8))
            #expect(Array(Self.decomposed.nfc.utf8) == Array(Self.composed.utf8) && "ada".nfc == "ada")
            var send = Pushrelay_V1_Send()
            send.userIds = [Self.decomposed, "ada"]
            send.excludeUserIds = [Self.decomposed]
            send.scope = Self.decomposed
            send.templateValues = ["circle_id": Self.decomposed]
            send.normalizeIdentities()
            #expect(send.userIds.map { Array($0.utf8) } == [Array(Self.composed.utf8), Array("ada".utf8)])
            #expect(Array(send.excludeUserIds[0].utf8) == Array(Self.composed.utf8))
            #expect(Array(send.scope.utf8) == Array(Self.composed.utf8))
            #expect(Array(send.templateValues["circle_id"]!.utf8) == Array(Self.composed.utf8))
        }

        @Test("NFC and NFD spellings are one user in REGISTER, LIST, SEND, exclusions, preferences and mutes")
        func oneUserWhateverTheSpelling() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("circl")
                let token = randomToken()
                _ = try await client.registerDevice(registration(user: Self.decomposed, token: token))
                // Registered under the other spelling again: the same device of the same user, not a second user.
                let again = try await client.registerDevice(registration(user: Self.composed, token: token))
                #expect(again.status == .updated)
                let listed = try await client.listDevices(userID: Self.decomposed)
                #expect(listed.devices.map(\.token) == [token])
                #expect(listed.devices.map { Array($0.userID.utf8) } == [Array(Self.composed.utf8)])

                // A SEND to both spellings reaches the one device once.
                let both = try await client.send(circlMessage(to: [Self.composed, Self.decomposed]))
                #expect(both.outcomes.map(\.outcome) == ["delivered"])
                // Excluding one spelling excludes the user named by the other.
                let excluded = try await client.send(
                    circlMessage(to: [Self.composed], excluding: [Self.decomposed]))
                #expect(excluded.outcomes.allSatisfy { $0.outcome != "delivered" })

                // An opt-out under one spelling applies to a SEND under the other.
                var preferences = Pushrelay_V1_SetPreferences()
                preferences.userID = Self.decomposed
                var off = Pushrelay_V1_TypePreference()
                off.notificationType = "message"
                off.enabled = false
                preferences.preferences = [off]
                _ = try await client.setPreferences(preferences)
                let optedOut = try await client.send(circlMessage(to: [Self.composed]))
                #expect(optedOut.outcomes.map(\.reason) == ["opted_out"])
                off.enabled = true
                preferences.userID = Self.composed
                preferences.preferences = [off]
                _ = try await client.setPreferences(preferences)

                // A mute under one spelling applies to a SEND under the other.
                var mute = Pushrelay_V1_SetMute()
                mute.userID = Self.composed
                mute.threadID = "circle-7-channel-3"
                _ = try await client.setMute(mute)
                let muted = try await client.send(circlMessage(to: [Self.decomposed]))
                #expect(muted.outcomes.map(\.reason) == ["muted"])
                #expect(try await client.mutes(userID: Self.decomposed).mutes.count == 1)
                await client.close()
            }
        }
    }
}
