import Foundation
import NIOCore
import PushRelayProtocol
import RelayServer
import Testing

extension RelayServerSuites {
    /// The relay's connection caps, in all and per tenant.
    @Suite struct ConnectionCapTests {
        @Test func aConnectionOverTheRelaysCapIsRefusedAtOnceAndOneClosedMakesRoom() async throws {
            try await RelayHarness.with(configure: { $0.maximumConnections = 2 }) { relay in
                let first = try await RawConnection.connect(port: relay.server.port, group: relay.group)
                let second = try await RawConnection.connect(port: relay.server.port, group: relay.group)
                #expect(await eventually { relay.server.connectionCount == 2 })
                let third = try await RawConnection.connect(port: relay.server.port, group: relay.group)
                let refusal = try #require(await third.next())
                #expect(refusal.kind == .error && refusal.requestID == 0)
                let error = try refusal.decode(Pushrelay_V1_Error.self)
                #expect(error.code == .tooManyConnections && error.retryAfterMs > 0)
                #expect(await third.next() == nil, "the refused connection is closed")
                await first.close()
                #expect(await eventually { relay.server.connectionCount == 1 })
                let fourth = try await RawConnection.connect(port: relay.server.port, group: relay.group)
                let answer = try #require(await fourth.hello(tenant: "circl", credential: relay.credentials["circl"]!))
                #expect(answer.kind == FrameKind.hello.answer)
                await second.close()
                await fourth.close()
            }
        }

        @Test func aTenantOverItsCapIsRefusedAtHelloWhileOtherTenantsConnect() async throws {
            try await RelayHarness.with(configure: { $0.maximumConnectionsPerTenant = 1 }) { relay in
                let circl = relay.credentials["circl"]!
                let first = try await RawConnection.connect(port: relay.server.port, group: relay.group)
                #expect(try await first.hello(tenant: "circl", credential: circl)?.kind == FrameKind.hello.answer)
                let second = try await RawConnection.connect(port: relay.server.port, group: relay.group)
                let refusal = try #require(try await second.hello(tenant: "circl", credential: circl))
                #expect(refusal.kind == .error)
                #expect(try refusal.decode(Pushrelay_V1_Error.self).code == .tooManyConnections)
                #expect(await second.next() == nil, "the refused connection is closed")
                let other = try await RawConnection.connect(port: relay.server.port, group: relay.group)
                let family = try await other.hello(
                    tenant: "familyportal", credential: relay.credentials["familyportal"]!)
                #expect(family?.kind == FrameKind.hello.answer)
                // The cap is given back when the tenant's connection closes.
                await first.close()
                let admitted = await eventually {
                    guard let again = try? await RawConnection.connect(port: relay.server.port, group: relay.group)
                    else { return false }
                    defer { Task { await again.close() } }
                    return (try? await again.hello(tenant: "circl", credential: circl))?.kind == FrameKind.hello.answer
                }
                #expect(admitted)
                await other.close()
            }
        }
    }
}
