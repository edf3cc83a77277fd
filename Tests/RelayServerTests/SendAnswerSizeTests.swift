import PushRelayProtocol
import SwiftProtobuf
import Testing

@testable import RelayServer

/// A SEND(wait)'s answer fits one frame: the outcomes beyond `max_frame_bytes` are left to QUERY_DELIVERIES.
@Suite struct SendAnswerSizeTests {
    /// An answer with `count` outcomes of users with 200-byte ids and APNs ids.
    private func answer(outcomes count: Int) -> Pushrelay_V1_SendResult {
        var answer = Pushrelay_V1_SendResult()
        answer.jobID = "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
        answer.outcomes = (0..<count).map { index in
            var outcome = Pushrelay_V1_DeviceOutcome()
            outcome.userID = String(repeating: "u", count: 190) + "\(100_000 + index)"
            outcome.token = String(repeating: "ab", count: 32)
            outcome.outcome = "delivered"
            outcome.apnsID = "5D3E1C2B-9A8F-4E7D-B6C5-A4F3E2D1C0B9"
            outcome.attempts = 1
            return outcome
        }
        return answer
    }

    @Test("10,000 outcomes of 200-byte user ids are cut to fit 1 MiB, and the answer says so")
    func aLargeAnswerIsCutToAFrame() throws {
        var large = answer(outcomes: 10_000)
        #expect(try (large.serializedBytes() as [UInt8]).count > 1_048_576)
        JobDispatcher.fit(&large, in: 1_048_576)
        let size = try (large.serializedBytes() as [UInt8]).count
        #expect(size <= 1_048_576 && size > 1_000_000 && large.outcomesTruncated)
        #expect(large.outcomes.count < 10_000 && large.outcomes.first?.userID.hasSuffix("100000") == true)
    }

    @Test("an answer that fits is left whole")
    func anAnswerThatFitsIsWhole() {
        var small = answer(outcomes: 100)
        let before = small
        JobDispatcher.fit(&small, in: 1_048_576)
        #expect(small == before && !small.outcomesTruncated)
    }
}
