import Foundation
import Testing

@testable import RelayServer

extension RelayServerSuites {
    /// A destination's refusals for one device each: counted by the provider's code, bounded in reasons, and
    /// recent ones told apart from old ones.
    @Suite struct DeviceRejectionsTests {
        @Test func refusalsAreCountedByCodeWithinABoundedSetOfReasons() {
            var rejections = DeviceRejections()
            let start = Date(timeIntervalSince1970: 1_800_000_000)
            rejections.record("SENDER_ID_MISMATCH", count: 2, at: start)
            rejections.record("INVALID_ARGUMENT: the data value is not a string", count: 1, at: start)
            rejections.record("SENDER_ID_MISMATCH", count: 3, at: start + 60)
            #expect(rejections.reasons["SENDER_ID_MISMATCH"] == .init(count: 5, since: start, last: start + 60))
            #expect(rejections.reasons["INVALID_ARGUMENT"]?.count == 1)
            for index in 0..<40 { rejections.record("CODE_\(index)", count: 1, at: start) }
            #expect(rejections.reasons.count == DeviceRejections.maximumReasons)
            #expect(rejections.reasons["other"]?.count == 27)
            // Only what was refused within the window is recent.
            let recent = rejections.recent(within: 30, now: start + 70)
            #expect(recent.map(\.reason) == ["SENDER_ID_MISMATCH"])
        }
    }
}
