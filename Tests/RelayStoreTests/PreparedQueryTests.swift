import Foundation
import Testing

@testable import RelayStore

@Suite("Prepared statements of the hot path")
struct PreparedQueryTests {
    private enum FirstName: PreparedStatementName {}
    private enum SecondName: PreparedStatementName {}

    @Test("a name keeps the first text it ran; another text under it is refused, other names are free")
    func aNameStandsForOneText() {
        let texts = PreparedQueryTexts()
        let first = ObjectIdentifier(FirstName.self)
        #expect(texts.text(of: first) == nil)
        #expect(texts.claim(first, for: "SELECT 1"))
        #expect(texts.claim(first, for: "SELECT 1"))
        #expect(!texts.claim(first, for: "SELECT 2"))
        #expect(texts.text(of: first) == "SELECT 1")
        #expect(texts.claim(ObjectIdentifier(SecondName.self), for: "SELECT 2"))
    }

    @Test("the hot path's prepared reads answer as the unprepared ones, call after call")
    func preparedReadsAnswerAsBefore() async throws {
        try await withTenantStore { store in
            for index in 0..<3 {
                try await store.setPreferences(tenant: "circl", user: "u\(index)", ["message": index != 1])
            }
            // More calls than PostgreSQL makes custom plans for before it weighs a generic one.
            for _ in 0..<8 {
                let settings = try await store.preferences(tenant: "circl", users: ["u0", "u1", "u2", "u3"])
                #expect(settings == ["u0": ["message": true], "u1": ["message": false], "u2": ["message": true]])
            }
        }
    }
}
