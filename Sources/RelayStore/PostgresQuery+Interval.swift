import PostgresNIO
import PushRelayProtocol

extension PostgresQuery.StringInterpolation {
    /// Interpolates `duration` as a PostgreSQL interval (`$n::float8 * interval '1 second'`, fractions of a
    /// second kept): `now() + \(interval: lease)` is a lease's end. The one way the store turns a `Duration`
    /// into SQL.
    mutating func appendInterpolation(interval duration: Duration) {
        appendInterpolation(duration.seconds)
        appendLiteral("::float8 * interval '1 second'")
    }
}
