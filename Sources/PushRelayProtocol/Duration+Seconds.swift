extension Duration {
    /// The duration in seconds, as a `Double`: the package's one conversion, for the relay, the store, the load test
    /// and the command line (a `TimeAmount` is NIO's own `TimeAmount(_:)`).
    package var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
