import Testing

@testable import RelayServer

/// The fan-out's send window on a test clock: fed the answers a pipe of a given round trip and capacity would
/// give, interval after interval.
@Suite struct SendWindowTests {
    /// A pipe to APNs: answers come a round trip after their sends, at most `capacity` a second.
    struct Pipe {
        var roundTrip: Duration
        var capacity: Double

        /// The answers a second of a window of `size` sends in flight: Little's law, within the capacity.
        func rate(window size: Int) -> Double {
            min(capacity, Double(size) / roundTrip.seconds)
        }
    }

    static let configuration = SendWindow.Configuration(minimum: 3_072, maximum: 32_768)

    /// The window's size after each of `intervals` intervals of answers through `pipe`, from `clock` on.
    static func sizes(
        through pipe: Pipe, intervals: Int, window: inout SendWindow, clock: inout ContinuousClock.Instant
    ) -> [Int] {
        var sizes: [Int] = []
        window.record(answers: 0, shortestRoundTrip: nil, at: clock)
        for _ in 0..<intervals {
            // Answers come in batches of a tenth of the interval; the shortest round trip of each is the pipe's.
            for _ in 0..<10 {
                clock = clock + window.configuration.interval / 10
                let answers = Int(
                    (pipe.rate(window: window.size) * (window.configuration.interval / 10).seconds).rounded())
                window.record(answers: answers, shortestRoundTrip: pipe.roundTrip, at: clock)
            }
            sizes.append(window.size)
        }
        return sizes
    }

    @Test func onLoopbackTheWindowStaysAtItsFloor() {
        var window = SendWindow(configuration: Self.configuration)
        var clock = ContinuousClock.now
        let sizes = Self.sizes(
            through: Pipe(roundTrip: .milliseconds(2), capacity: 60_000), intervals: 20, window: &window, clock: &clock)
        #expect(sizes.allSatisfy { $0 == 3_072 })
    }

    @Test func atALongRoundTripTheWindowDoublesUntilThePipeIsFullThenHoldsTwiceWhatItCarries() {
        var window = SendWindow(configuration: Self.configuration)
        var clock = ContinuousClock.now
        // 80 ms, and a relay that sends at most 50,000 a second: the pipe holds 50,000 × 0.08 = 4,000.
        let pipe = Pipe(roundTrip: .milliseconds(80), capacity: 50_000)
        let sizes = Self.sizes(through: pipe, intervals: 12, window: &window, clock: &clock)
        // First interval: 3,072 in flight at 80 ms answer 38,400 a second; twice that × 80 ms is 6,144.
        #expect(sizes[0] == 6_144)
        // Then the relay's 50,000 a second limit the rate: the window settles at 2 × 50,000 × 0.08.
        #expect(sizes.suffix(8).allSatisfy { $0 == 8_000 })
        #expect(pipe.rate(window: window.size) == 50_000)
    }

    @Test func theWindowStaysWithinItsCapHoweverLongTheRoundTrip() {
        var window = SendWindow(configuration: Self.configuration)
        var clock = ContinuousClock.now
        let sizes = Self.sizes(
            through: Pipe(roundTrip: .seconds(2), capacity: 1_000_000), intervals: 12, window: &window, clock: &clock)
        #expect(sizes.last == 32_768)
        #expect(sizes.allSatisfy { $0 <= 32_768 })
    }

    @Test func aPauseLongerThanTheMemoryStartsTheWindowAtItsFloorAgain() {
        var window = SendWindow(configuration: Self.configuration)
        var clock = ContinuousClock.now
        _ = Self.sizes(
            through: Pipe(roundTrip: .milliseconds(200), capacity: 50_000), intervals: 8, window: &window, clock: &clock
        )
        #expect(window.size > 3_072)
        clock = clock + .seconds(11)
        window.record(answers: 10, shortestRoundTrip: .milliseconds(200), at: clock)
        #expect(window.size == 3_072)
        #expect(window.samples.isEmpty)
    }

    @Test func pagesHoldTheirSharesAndBorrowOnlyTheRoomTheWindowHas() {
        var tuning = FanOutTuning.standard
        tuning.minimumSendsInFlight = 80
        tuning.maximumSendsInFlight = 80
        // Eight loops share the window: seven page loops and the opening pages' one.
        tuning.pageLoops = 7
        tuning.openingPageLoops = 1
        let window = SharedSendWindow(tuning)
        // A page of 3 devices claims 3; seven pages of many claim a share of 10 each.
        #expect(window.join(upTo: 3) == 3)
        for _ in 0..<7 { #expect(window.join(upTo: 4_000) == 10) }
        #expect(window.room == 7)
        // The room is borrowed one send at a time, and no further.
        for _ in 0..<7 { #expect(window.borrow()) }
        #expect(!window.borrow())
        #expect(window.room == 0)
        // A page that ends gives its claim back: others may borrow it.
        window.release(3)
        #expect(window.room == 3)
        #expect(window.borrow())
    }
}
