import Testing

@testable import RelayServer

/// Pages of rows are decoded and encoded on a thread of their own, not on the event loops every connection shares.
@Suite struct RowReadExecutorTests {
    @Test func workPreferringTheRowReadExecutorRunsOnItsThreadAndNothingElseDoes() async {
        #expect(!RowReadExecutor.shared.isCurrent)
        let (before, afterSuspending) = await withTaskExecutorPreference(RowReadExecutor.shared) {
            let before = RowReadExecutor.shared.isCurrent
            await Task.yield()
            return (before, RowReadExecutor.shared.isCurrent)
        }
        #expect(before && afterSuspending)
        #expect(!RowReadExecutor.shared.isCurrent)
    }
}
