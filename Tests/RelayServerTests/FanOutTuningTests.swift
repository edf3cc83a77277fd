import Foundation
import PostgresNIO
import PushRelayClient
import RelayServer
import Testing

extension RelayServerSuites {
    /// The fan-out's sizes are one value given to the relay: the same code with small pages and few sends in
    /// flight writes many pages and still sends every device once.
    @Suite struct FanOutTuningTests {
        @Test func smallPagesSplitAListedSendAsTheTuningSaysAndSendEveryDeviceOnce() async throws {
            var tuning = FanOutTuning.standard
            tuning.openingPageSize = 2
            tuning.firstPageSize = 3
            tuning.laterPageSize = 5
            tuning.pageLoops = 2
            tuning.minimumSendsInFlight = 4
            tuning.maximumSendsInFlight = 4
            tuning.recordBatch = 3
            tuning.answerBatch = 1
            #expect((1...6).map(tuning.pageSize(page:)) == [2, 3, 5, 5, 5, 5])
            let small = tuning
            try await RelayHarness.with(configureRelay: { $0.fanOutTuning = small }) { relay in
                let client = relay.client("circl")
                let users = (0..<23).map { "u\($0)" }
                var tokens: [String] = []
                for user in users {
                    let token = randomToken()
                    tokens.append(token)
                    _ = try await client.registerDevice(registration(user: user, token: token))
                }
                let result = try await client.send(circlMessage(to: users))
                #expect(result.job.delivered == 23, "\(result.job)")
                let sent = relay.simulator.receivedRequests().compactMap(\.deviceToken)
                #expect(sent.count == 23)
                #expect(Set(sent) == Set(tokens))
                // 23 users in pages of 2, 3 (up to page pageLoops), then 5: 2 + 3 + 5 + 5 + 5 + 3.
                var sizes: [Int] = []
                for try await size in try await relay.store.client.query(
                    """
                    SELECT cardinality(tokens)::int8 FROM job_pages
                    WHERE job_id = \(UUID(uuidString: result.jobID)!) AND page > 0 ORDER BY page
                    """
                ).decode(Int.self) {
                    sizes.append(size)
                }
                #expect(sizes == [2, 3, 5, 5, 5, 3])
                await client.close()
            }
        }
    }
}
