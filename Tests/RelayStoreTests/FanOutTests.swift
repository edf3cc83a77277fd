import Foundation
import RelayStore
import Testing

@Suite("Fan-out lookups and dead tokens")
struct FanOutTests {
    @Test("active devices of many users come in one query; inactive ones and other tenants' are left out")
    func byUsers() async throws {
        try await withTenantStore { store in
            for environment in [TenantConfiguration.Environment.production, .development] {
                try await store.registerDevice(
                    tenant: "familyportal",
                    registration: DeviceRegistration(userID: "mom", token: deviceToken(1), environment: environment),
                    at: instant(0))
            }
            try await store.registerDevice(
                tenant: "familyportal", registration: DeviceRegistration(userID: "dad", token: deviceToken(2)),
                at: instant(0))
            try await store.registerDevice(
                tenant: "familyportal", registration: DeviceRegistration(userID: "kid", token: deviceToken(3)),
                at: instant(0))
            try await store.deactivateDevice(tenant: "familyportal", token: deviceToken(3), appleTimestamp: instant(5))
            try await store.registerDevice(
                tenant: "circl", registration: DeviceRegistration(userID: "dad", token: deviceToken(4)), at: instant(0))

            let devices = try await store.activeDevices(tenant: "familyportal", users: ["mom", "dad", "kid", "nobody"])
            #expect(devices.map(\.userID) == ["dad", "mom", "mom"])
            #expect(devices.allSatisfy { $0.active && $0.tenantID == "familyportal" })
            #expect(Set(devices.map(\.token)) == [deviceToken(1), deviceToken(2)])
            #expect(try await store.activeDevices(tenant: "familyportal", users: []).isEmpty)
            #expect(try await store.activeDevices(tenant: "anky", users: ["mom", "dad"]).isEmpty)
        }
    }

    @Test("active devices by token, in either case; unknown, inactive and foreign tokens match nothing")
    func byTokens() async throws {
        try await withTenantStore { store in
            for seed in 1...3 {
                try await store.registerDevice(
                    tenant: "circl", registration: DeviceRegistration(userID: "u\(seed)", token: deviceToken(seed)),
                    at: instant(0))
            }
            try await store.deactivateDevice(tenant: "circl", token: deviceToken(3), appleTimestamp: instant(5))
            try await store.registerDevice(
                tenant: "anky", registration: DeviceRegistration(userID: "x", token: deviceToken(9)), at: instant(0))

            let devices = try await store.activeDevices(
                tenant: "circl",
                tokens: [
                    deviceToken(2).uppercased(), deviceToken(1), deviceToken(1), deviceToken(3), deviceToken(9),
                    "not a token",
                ])
            #expect(devices.map(\.token) == [deviceToken(1), deviceToken(2)])
            #expect(devices.map(\.userID) == ["u1", "u2"])
            #expect(try await store.activeDevices(tenant: "circl", tokens: []).isEmpty)
        }
    }

    @Test("a listed page is read and written in one statement: by users or tokens, excluded users left out")
    func listedPageReadAndWritten() async throws {
        try await withTenantStore { store in
            for (user, seed) in [("ann", 3), ("ann", 1), ("bob", 2), ("cat", 4), ("dan", 5)] {
                try await store.registerDevice(
                    tenant: "circl", registration: DeviceRegistration(userID: user, token: deviceToken(seed)),
                    at: instant(0))
            }
            try await store.deactivateDevice(tenant: "circl", token: deviceToken(5), appleTimestamp: instant(5))
            try await store.registerDevice(
                tenant: "anky", registration: DeviceRegistration(userID: "bob", token: deviceToken(9)), at: instant(0))
            let job = try await store.createJob(
                tenant: "circl", notificationType: "message", idempotencyKey: nil, request: []
            ).job
            func pages() async throws -> [String] {
                try await column(
                    """
                    SELECT page || ' ' || state || ' ' || coalesce(lease_owner, '-') || ' ' || claims || ' '
                           || array_to_string(users, ',') || ' ' || cardinality(tokens)
                    FROM job_pages WHERE job_id = '\(job.id)' ORDER BY page
                    """, in: store)
            }
            // By users, leased: ann's two devices and bob's, by token; cat excluded, dan's device inactive, eve has
            // none, anky's bob is another tenant's.
            let first = try await store.addListedJobPage(
                jobID: job.id, tenant: "circl", page: 1, dueAt: instant(0),
                recipients: .users(["ann", "bob", "cat", "dan", "eve"]), excludedUsers: ["cat"], leasedTo: "planner")
            #expect(first.devices.map(\.userID) == ["ann", "bob", "ann"])
            #expect(first.devices.map(\.token) == [deviceToken(1), deviceToken(2), deviceToken(3)])
            let leased = try #require(first.leased)
            #expect(leased.page == 1 && leased.claims == 1 && leased.topicRange == nil)
            #expect(leased.tokens == first.devices.map(\.token) && leased.users == first.devices.map(\.userID))
            #expect(try await pages() == ["1 leased planner 1 ann,bob,ann 3"])
            // By tokens, an APNs token in either case (a token is not trimmed: " token" is no token), not leased:
            // page 2 pending.
            let second = try await store.addListedJobPage(
                jobID: job.id, tenant: "circl", page: 2, dueAt: instant(0),
                recipients: .tokens([
                    deviceToken(4).uppercased(), deviceToken(2), " \(deviceToken(5))", deviceToken(9), "no token",
                ]),
                excludedUsers: [])
            #expect(second.devices.map(\.userID) == ["bob", "cat"] && second.leased == nil)
            // No device: no page. Written before (a planner that took over): left as it was, not leased again.
            let none = try await store.addListedJobPage(
                jobID: job.id, tenant: "circl", page: 3, dueAt: instant(0), recipients: .users(["eve"]),
                excludedUsers: [], leasedTo: "planner")
            #expect(none.devices.isEmpty && none.leased == nil)
            let again = try await store.addListedJobPage(
                jobID: job.id, tenant: "circl", page: 1, dueAt: instant(0), recipients: .users(["cat"]),
                excludedUsers: [], leasedTo: "other")
            #expect(again.devices.map(\.userID) == ["cat"] && again.leased == nil)
            #expect(try await pages() == ["1 leased planner 1 ann,bob,ann 3", "2 pending - 0 bob,cat 2"])
        }
    }

    @Test("a topic page is a token range: whole tokens, excluded users not counted, a takeover goes on from it")
    func topicPageWrittenAsRange() async throws {
        try await withTenantStore { store in
            for seed in 1...12 {
                try await store.registerDevice(
                    tenant: "familyportal",
                    registration: DeviceRegistration(userID: "user\(seed)", token: deviceToken(seed), topics: ["chat"]),
                    at: instant(0))
            }
            try await store.registerDevice(
                tenant: "familyportal",
                registration: DeviceRegistration(userID: "user5b", token: deviceToken(5), topics: ["chat"]),
                at: instant(0))
            let job = try await store.createJob(
                tenant: "familyportal", notificationType: "chat_message", idempotencyKey: nil, request: []
            ).job
            /// Page `page` from the devices after `after`, 5 at a time.
            func write(
                page: Int, after: String?, excluding excluded: [String] = [], leasedTo owner: String? = nil,
                withDevices: Bool = false
            ) async throws -> TopicPageWrite? {
                try await store.addTopicJobPage(
                    jobID: job.id, tenant: "familyportal", page: page, dueAt: instant(0), topic: "chat", after: after,
                    limit: 5, excludedUsers: excluded, leasedTo: owner, withDevices: withDevices)
            }
            // Tokens 1-5, the fifth held by two users: six devices read, user2's not counted.
            let first = try #require(try await write(page: 1, after: nil, excluding: ["user2"], leasedTo: "planner"))
            #expect(first.lastToken == deviceToken(5) && first.devicesRead == 6 && first.pageDevices == 5)
            #expect(!first.stood)
            // Leased at once, the new page comes as claimed, with its devices as the sender would read its range.
            let firstRange = TopicRange(topic: "chat", after: "", last: first.lastToken)
            let leased = try #require(first.leased)
            #expect(leased.page.jobID == job.id && leased.page.page == 1 && leased.page.claims == 1)
            #expect(leased.page.topicRange == firstRange && leased.page.tokens.isEmpty)
            let firstDevices = try await store.activeDevices(
                tenant: "familyportal", in: firstRange, excludedUsers: ["user2"])
            #expect(firstDevices.map(\.userID) == ["user1", "user3", "user4", "user5", "user5b"])
            #expect(leased.devices == firstDevices)
            #expect(
                try await column(
                    "SELECT state || ' ' || lease_owner || ' ' || claims FROM job_pages WHERE job_id = '\(job.id)'",
                    in: store) == ["leased planner 1"])
            // Tokens 6-10, every user excluded: no page 2.
            let excluded = (6...10).map { "user\($0)" }
            let second = try #require(try await write(page: 2, after: first.lastToken, excluding: excluded))
            #expect(second.lastToken == deviceToken(10) && second.devicesRead == 5 && second.pageDevices == 0)
            // Tokens 11-12 as page 2: fewer than 5, the topic is done; nothing after them. Not leased, the new page
            // comes with its devices when asked: those its range holds.
            let third = try #require(try await write(page: 2, after: second.lastToken, withDevices: true))
            #expect(third.lastToken == deviceToken(12) && third.devicesRead == 2 && third.pageDevices == 2)
            #expect(third.leased == nil)
            let thirdRange = TopicRange(topic: "chat", after: second.lastToken, last: third.lastToken)
            #expect(
                third.pendingDevices
                    == (try await store.activeDevices(tenant: "familyportal", in: thirdRange, excludedUsers: [])))
            #expect(third.pendingDevices?.map(\.userID) == ["user11", "user12"])
            // Written before, it comes without devices; not asked, neither.
            let stood = try await write(page: 2, after: second.lastToken, withDevices: true)
            #expect(stood?.pendingDevices == nil && stood?.stood == true && stood?.lastToken == deviceToken(12))
            #expect(second.pendingDevices == nil)
            #expect(try await write(page: 3, after: third.lastToken) == nil)

            let pages = try await column(
                """
                SELECT page || ' ' || topic || ' ' || range_after || '-' || range_last || ' ' || range_devices || ' '
                       || cardinality(tokens) || ' ' || cardinality(users)
                FROM job_pages WHERE job_id = '\(job.id)' ORDER BY page
                """, in: store)
            #expect(pages == ["1 chat -\(deviceToken(5)) 5 0 0", "2 chat \(deviceToken(10))-\(deviceToken(12)) 2 0 0"])

            // A planner taking over after token 0 was registered writes page 1 again: the page written first
            // stands, and the next page starts after its stored last token, not after the one just read.
            try await store.registerDevice(
                tenant: "familyportal",
                registration: DeviceRegistration(userID: "user0", token: deviceToken(0), topics: ["chat"]),
                at: instant(0))
            let again = try #require(try await write(page: 1, after: nil, leasedTo: "planner"))
            #expect(again.lastToken == deviceToken(5) && again.devicesRead == 5 && again.stood)
            // It is not leased again, and its devices are not handed out: they are not the stored page's.
            #expect(again.leased == nil)
            #expect(
                try await column("SELECT count(*)::text FROM job_pages WHERE job_id = '\(job.id)'", in: store) == ["2"])

            // The sender reads a range's devices as registered then: after `after`, through `last`, less the
            // excluded users and inactive devices.
            try await store.deactivateDevice(tenant: "familyportal", token: deviceToken(4), appleTimestamp: instant(9))
            let range = TopicRange(topic: "chat", after: deviceToken(2), last: deviceToken(5))
            let devices = try await store.activeDevices(tenant: "familyportal", in: range, excludedUsers: ["user5b"])
            #expect(devices.map(\.userID) == ["user3", "user5"])
            let whole = TopicRange(topic: "chat", after: "", last: deviceToken(12))
            #expect(try await store.activeDevices(tenant: "familyportal", in: whole, excludedUsers: []).count == 13)
            #expect(try await store.activeDevices(tenant: "anky", in: whole, excludedUsers: []).isEmpty)
            let photos = TopicRange(topic: "photos", after: "", last: deviceToken(12))
            #expect(try await store.activeDevices(tenant: "familyportal", in: photos, excludedUsers: []).isEmpty)
        }
    }

    @Test("a topic's devices come in token-ordered pages; a token held by two users is never split")
    func byTopicPaged() async throws {
        try await withTenantStore { store in
            // 12 devices on chat (seeds 1…12), one more on photos only, one dead, one of another tenant.
            for seed in 1...12 {
                try await store.registerDevice(
                    tenant: "familyportal",
                    registration: DeviceRegistration(
                        userID: "user\(seed)", token: deviceToken(seed),
                        topics: seed.isMultiple(of: 3)
                            ? ["chat", "photos"] : ["chat"]),
                    at: instant(0))
            }
            // Seed 5 is the fifth token: a second user holds it too, so the first page of 5 has 6 rows.
            try await store.registerDevice(
                tenant: "familyportal",
                registration: DeviceRegistration(userID: "user5b", token: deviceToken(5), topics: ["chat"]),
                at: instant(0))
            try await store.registerDevice(
                tenant: "familyportal",
                registration: DeviceRegistration(userID: "photographer", token: deviceToken(20), topics: ["photos"]),
                at: instant(0))
            try await store.registerDevice(
                tenant: "familyportal",
                registration: DeviceRegistration(userID: "gone", token: deviceToken(21), topics: ["chat"]),
                at: instant(0))
            try await store.deactivateDevice(tenant: "familyportal", token: deviceToken(21), appleTimestamp: instant(9))
            try await store.registerDevice(
                tenant: "circl", registration: DeviceRegistration(userID: "other", token: deviceToken(22)),
                at: instant(0))

            var pages: [[DeviceTarget]] = []
            var after: String?
            while true {
                let page = try await store.activeDevices(tenant: "familyportal", topic: "chat", after: after, limit: 5)
                if page.isEmpty { break }
                pages.append(page)
                after = page.last?.token
                if page.count < 5 { break }
            }
            #expect(pages.map(\.count) == [6, 5, 2])
            #expect(pages[0].filter { $0.token == deviceToken(5) }.map(\.userID) == ["user5", "user5b"])
            let all = pages.flatMap { $0 }
            #expect(all.map(\.token) == all.map(\.token).sorted())
            #expect(Set(all.map(\.userID)) == Set((1...12).map { "user\($0)" } + ["user5b"]))
            #expect(all.allSatisfy { $0.destination == .apns(.production) })

            let photos = try await store.activeDevices(tenant: "familyportal", topic: "photos", limit: 100)
            #expect(photos.map(\.userID) == ["user3", "user6", "user9", "user12", "photographer"])
            #expect(try await store.activeDevices(tenant: "familyportal", topic: "none", limit: 10).isEmpty)
            #expect(try await store.activeDevices(tenant: "anky", topic: "chat", limit: 10).isEmpty)
            await #expect(throws: RelayStoreError.self) {
                try await store.activeDevices(tenant: "familyportal", topic: "chat", limit: 0)
            }

            // A page read again by its token range: only active devices of the topic, both ends included.
            let run = try await store.activeDevices(
                tenant: "familyportal", topic: "chat", storedTokensFrom: deviceToken(3), through: deviceToken(21)
            )
            #expect(run.map(\.userID) == (3...12).flatMap { $0 == 5 ? ["user5", "user5b"] : ["user\($0)"] })
            let photoRun = try await store.activeDevices(
                tenant: "familyportal", topic: "photos", storedTokensFrom: deviceToken(6), through: deviceToken(20)
            )
            #expect(photoRun.map(\.userID) == ["user6", "user9", "user12", "photographer"])
            #expect(
                try await store.activeDevices(
                    tenant: "anky", topic: "chat", storedTokensFrom: deviceToken(1), through: deviceToken(22)
                ).isEmpty)
        }
    }

    @Test("a dead token stays dead after its row is deleted: an older registration is inactive, a newer one active")
    func deadTokenAfterUnregister() async throws {
        try await withTenantStore { store in
            let token = deviceToken(30)
            let registration = DeviceRegistration(userID: "A", token: token)
            try await store.registerDevice(tenant: "circl", registration: registration, at: instant(0))
            #expect(try await store.deactivateDevice(tenant: "circl", token: token, appleTimestamp: instant(100)) == 1)
            #expect(try await store.unregisterDevice(tenant: "circl", token: token) == 1)
            #expect(try await store.deadTokenTimestamp(tenant: "circl", token: token) == instant(100))

            let stale = try await store.registerDevice(tenant: "circl", registration: registration, at: instant(50))
            #expect(stale.status == .notReactivatedAfterInvalidation)
            #expect(!stale.applied)
            #expect(!stale.device.active)
            #expect(stale.device.invalidatedAt == instant(100))
            #expect(try await store.activeDevices(tenant: "circl", tokens: [token]).isEmpty)
            // At Apple's very timestamp it is still dead.
            let same = try await store.registerDevice(tenant: "circl", registration: registration, at: instant(100))
            #expect(same.status == .notReactivatedAfterInvalidation)

            let newer = try await store.registerDevice(tenant: "circl", registration: registration, at: instant(150))
            #expect(newer.status == .reactivated)
            #expect(newer.device.active)
            #expect(newer.device.invalidatedAt == nil)
            #expect(try await store.activeDevices(tenant: "circl", tokens: [token]).map(\.userID) == ["A"])
        }
    }

    @Test("a dead token stays dead after its row is replaced (anky) and another user registers it late")
    func deadTokenAfterReplacement() async throws {
        try await withTenantStore { store in
            let dead = deviceToken(31)
            try await store.registerDevice(
                tenant: "anky", registration: DeviceRegistration(userID: "u1", token: dead), at: instant(0))
            try await store.deactivateDevice(tenant: "anky", token: dead, appleTimestamp: instant(100))
            let replaced = try await store.registerDevice(
                tenant: "anky", registration: DeviceRegistration(userID: "u1", token: deviceToken(32)),
                at: instant(120))
            #expect(replaced.replacedToken == dead)
            #expect(replaced.device.active)
            #expect(try await store.devices(tenant: "anky", token: dead).isEmpty)

            // A registration of the dead token made before Apple's timestamp (arriving late) stays inactive.
            let late = try await store.registerDevice(
                tenant: "anky", registration: DeviceRegistration(userID: "u2", token: dead), at: instant(50))
            #expect(late.status == .notReactivatedAfterInvalidation)
            #expect(try await store.devices(tenant: "anky", user: "u2").map(\.active) == [false])
            #expect(try await store.activeDevices(tenant: "anky", users: ["u2"]).isEmpty)

            let fresh = try await store.registerDevice(
                tenant: "anky", registration: DeviceRegistration(userID: "u2", token: dead), at: instant(150))
            #expect(fresh.status == .reactivated)
            #expect(try await store.activeDevices(tenant: "anky", users: ["u2"]).map(\.token) == [dead])
            // u1's replacement was never touched.
            #expect(try await store.activeDevices(tenant: "anky", users: ["u1"]).map(\.token) == [deviceToken(32)])
        }
    }

    @Test("a verdict for a token without a row is remembered; the latest timestamp wins; tenants are apart")
    func deadTokenWithoutRow() async throws {
        try await withTenantStore { store in
            let token = deviceToken(33)
            #expect(try await store.deactivateDevice(tenant: "circl", token: token, appleTimestamp: instant(200)) == 0)
            #expect(try await store.deactivateDevice(tenant: "circl", token: token, appleTimestamp: instant(100)) == 0)
            #expect(try await store.deadTokenTimestamp(tenant: "circl", token: token) == instant(200))
            #expect(try await store.deactivateDevice(tenant: "nobody", token: token, appleTimestamp: instant(1)) == 0)

            let stale = try await store.registerDevice(
                tenant: "circl", registration: DeviceRegistration(userID: "A", token: token), at: instant(150))
            #expect(stale.status == .notReactivatedAfterInvalidation)
            #expect(stale.device.invalidatedAt == instant(200))

            // Another tenant's verdict says nothing about this tenant's token.
            #expect(try await store.deadTokenTimestamp(tenant: "familyportal", token: token) == nil)
            let elsewhere = try await store.registerDevice(
                tenant: "familyportal", registration: DeviceRegistration(userID: "A", token: token), at: instant(150))
            #expect(elsewhere.status == .created)
            #expect(elsewhere.device.active)
        }
    }
}
