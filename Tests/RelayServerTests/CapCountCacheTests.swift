import RelayStore
import Testing

@testable import RelayServer

@Suite("What the policy reads counted of users' capped rows, kept per tenant and type")
struct CapCountCacheTests {
    /// An epoch whose snapshot's `xmax` is `order`.
    private static func epoch(_ order: Int, openJobs: Int = 0) -> RowCountEpoch {
        RowCountEpoch(snapshot: "10:\(order):", openJobs: openJobs)
    }

    @Test("a tenant's type keeps its own users' counts, with the oldest epoch among them and the most open jobs")
    func countsAreKeptPerTenantAndType() {
        let cache = CapCountCache()
        cache.remember(
            tenant: "a", notificationType: "x", users: ["u1", "u2"], known: nil, counted: ["u1": 3],
            epoch: Self.epoch(20, openJobs: 1))
        cache.remember(
            tenant: "a", notificationType: "y", users: ["u1"], known: nil, counted: [:], epoch: Self.epoch(30))
        cache.remember(
            tenant: "a", notificationType: "x", users: ["u3"], known: nil, counted: ["u3": 1],
            epoch: Self.epoch(25, openJobs: 2))
        let known = cache.known(tenant: "a", notificationType: "x", users: ["u1", "u2", "u3", "u4"])
        #expect(known?.rows == [3, 0, 1, -1])
        #expect(known?.epoch.order == 20 && known?.epoch.openJobs == 2)
        #expect(cache.known(tenant: "a", notificationType: "y", users: ["u1", "u2"])?.rows == [0, -1])
        #expect(cache.known(tenant: "b", notificationType: "x", users: ["u1"]) == nil)
        // A user known and not counted again keeps what was known, and its epoch.
        let earlier = cache.known(tenant: "a", notificationType: "x", users: ["u1", "u5"])
        #expect(earlier?.rows == [3, -1])
        cache.remember(
            tenant: "a", notificationType: "x", users: ["u1", "u5"], known: earlier, counted: [:],
            epoch: Self.epoch(40))
        #expect(cache.known(tenant: "a", notificationType: "x", users: ["u1", "u5"])?.rows == [3, 0])
        #expect(cache.known(tenant: "a", notificationType: "x", users: ["u1"])?.epoch.order == 20)
        // A user known and counted again takes the new count and its epoch.
        cache.remember(
            tenant: "a", notificationType: "x", users: ["u1", "u5"], known: earlier, counted: ["u1": 5],
            epoch: Self.epoch(50))
        #expect(cache.known(tenant: "a", notificationType: "x", users: ["u5", "u1"])?.rows == [0, 5])
        #expect(cache.known(tenant: "a", notificationType: "x", users: ["u1"])?.epoch.order == 50)
        // Counts for another number of users than the read's are not taken for these users: nothing is remembered.
        cache.remember(
            tenant: "a", notificationType: "x", users: ["u1", "u6", "u7"], known: earlier, counted: ["u1": 9],
            epoch: Self.epoch(60))
        let after = cache.known(tenant: "a", notificationType: "x", users: ["u1", "u6", "u7"])
        #expect(after?.rows == [5, -1, -1] && after?.epoch.order == 50)
    }

    @Test("it forgets everything at its capacity of reads, and of users")
    func itIsBounded() {
        let cache = CapCountCache()
        for read in 0..<CapCountCache.epochCapacity {
            cache.remember(
                tenant: "a", notificationType: "x", users: ["u\(read)"], known: nil, counted: [:],
                epoch: Self.epoch(read + 1))
        }
        #expect(cache.known(tenant: "a", notificationType: "x", users: ["u0"]) != nil)
        cache.remember(
            tenant: "a", notificationType: "x", users: ["last"], known: nil, counted: [:], epoch: Self.epoch(9_999))
        #expect(cache.known(tenant: "a", notificationType: "x", users: ["u0"]) == nil)
        #expect(cache.known(tenant: "a", notificationType: "x", users: ["last"])?.rows == [0])
        let users = (0..<CapCountCache.capacity).map { "v\($0)" }
        cache.remember(
            tenant: "a", notificationType: "x", users: users, known: nil, counted: [:], epoch: Self.epoch(10_000))
        #expect(cache.known(tenant: "a", notificationType: "x", users: ["last"]) == nil)
        #expect(cache.known(tenant: "a", notificationType: "x", users: ["v0", "v199999"])?.rows == [0, 0])
    }
}
