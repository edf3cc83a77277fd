/// How many fan-out sends one process keeps in flight: enough to fill its pipe to APNs at the round trip it
/// measures (Little's law: sends in flight = rate × round trip), within a floor and a cap.
///
/// The pipe is estimated as BBR estimates a TCP path: its rate as the most answers a second seen in a recent
/// interval, its round trip as the shortest round trip seen recently (the longer ones include waiting in queues,
/// which more sends in flight only lengthen). The window is twice their product: while the round trip limits the
/// rate, each interval's rate follows the window and the window doubles; once the relay or APNs limits it, the
/// window settles at twice what the pipe holds. On loopback the product is small and the window stays at its
/// floor; at 80 ms it grows until the sends fill the pools' connections (which grow with it, up to their cap).
///
/// A value: the page senders of a process share one through ``SharedSendWindow``.
struct SendWindow {
    /// The window's bounds and how it measures.
    struct Configuration: Equatable {
        /// Sends in flight however short the round trip.
        var minimum: Int
        /// Sends in flight however long the round trip: what bounds the memory of the sends waiting for answers.
        var maximum: Int
        /// How long one measurement of the rate lasts.
        var interval: Duration = .milliseconds(250)
        /// How many intervals the rate and the round trip are remembered.
        var remembered = 40
    }

    /// One interval's measurement.
    struct Sample: Equatable {
        /// Answers a second in the interval.
        var rate: Double
        /// The shortest round trip of the interval's answers, when it had any.
        var shortestRoundTrip: Duration?
    }

    let configuration: Configuration
    /// Sends in flight the process allows now.
    private(set) var size: Int
    /// The last intervals' measurements, oldest first.
    private(set) var samples: [Sample] = []
    /// When the interval being measured began, its answers so far and their shortest round trip.
    private var current: (start: ContinuousClock.Instant, answers: Int, shortest: Duration?)?

    /// A window at its floor.
    init(configuration: Configuration) {
        self.configuration = configuration
        self.size = configuration.minimum
    }

    /// Notes `answers` answers taken at `now`, the shortest of whose round trips was `shortestRoundTrip`;
    /// at the end of an interval, sizes the window again.
    mutating func record(answers: Int, shortestRoundTrip: Duration?, at now: ContinuousClock.Instant) {
        // The first answers, and the first after a pause longer than the memory, start an interval: they were
        // sent before it, and nothing measured before the pause describes the pipe now.
        guard var interval = current, now - interval.start <= configuration.interval * configuration.remembered
        else {
            samples.removeAll()
            size = configuration.minimum
            current = (now, 0, nil)
            return
        }
        let elapsed = now - interval.start
        interval.answers += answers
        interval.shortest = Self.shorter(interval.shortest, shortestRoundTrip)
        guard elapsed >= configuration.interval else {
            current = interval
            return
        }
        samples.append(Sample(rate: Double(interval.answers) / elapsed.seconds, shortestRoundTrip: interval.shortest))
        if samples.count > configuration.remembered { samples.removeFirst(samples.count - configuration.remembered) }
        current = (now, 0, nil)
        size = Self.size(for: samples, configuration)
    }

    /// Twice the rate × round trip product of `samples`, within the bounds.
    static func size(for samples: [Sample], _ configuration: Configuration) -> Int {
        let rate = samples.map(\.rate).max() ?? 0
        guard let roundTrip = samples.compactMap(\.shortestRoundTrip).min() else { return configuration.minimum }
        let product = 2 * rate * roundTrip.seconds
        guard product.isFinite, product < Double(configuration.maximum) else { return configuration.maximum }
        return max(configuration.minimum, Int(product.rounded()))
    }

    private static func shorter(_ a: Duration?, _ b: Duration?) -> Duration? {
        switch (a, b) {
        case (let a?, let b?): min(a, b)
        case (nil, let b): b
        case (let a, nil): a
        }
    }
}
