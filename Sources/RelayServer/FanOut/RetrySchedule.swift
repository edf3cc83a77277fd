/// When held notifications are tried again: a capped exponential backoff with jitter, by retry round, so a
/// provider that is away is not hammered and one that comes back is not met by every held device at once.
struct RetrySchedule: Sendable, Hashable {
    /// The delay before the first retry.
    var first: Duration = .seconds(1)
    /// The longest delay between two tries.
    var maximum: Duration = .seconds(60)
    /// The share of each delay drawn at random on either side (0.2: ±20%).
    var jitter: Double = 0.2

    /// The schedule the fan-out uses: 1 s doubling up to 60 s, ±20%.
    static let standard = RetrySchedule()

    /// The delay before retry round `round` (1 for the first retry), drawn with `random`.
    func delay(round: Int, using random: inout some RandomNumberGenerator) -> Duration {
        let doublings = min(max(round - 1, 0), 30)
        let base = min(first * (1 << doublings), maximum)
        let factor = 1 + Double.random(in: -jitter...jitter, using: &random)
        return base * factor
    }
}
