import Testing

@testable import LoadTest

@Suite struct LoadTestReportTests {
    @Test func percentilesAreNearestRank() {
        let latency = LoadTestReport.Latency((1...1000).map(Double.init))
        #expect(latency.count == 1000)
        #expect(latency.p50 == 500)
        #expect(latency.p99 == 990)
        #expect(latency.p999 == 999)
        #expect(latency.max == 1000)
        #expect(LoadTestReport.Latency([]).p99 == 0)
    }
}
