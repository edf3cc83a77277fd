import PushRelayProtocol

/// What a frame costs against its credential's request limit (`requests_per_second`, `request_burst`).
///
/// Every frame after HELLO pays one token per whole 64 KiB of its body after decompression (``bodyTokens(_:)``),
/// taken before it is decompressed, so a tiny zstd frame does not buy megabytes of work: a PING too. A request pays
/// one token more, plus, for QUERY_DELIVERIES and LIST_DEVICES, one per 100 rows it may read beyond the first 100
/// (a page of 1,000 rows costs 10, not 1) (``of(_:limits:)``). Never more than the burst at once, so every frame can
/// be admitted.
enum RequestCost {
    /// Body bytes (after decompression) that one token pays for.
    static let bytesPerToken = 65_536
    /// Delivery rows that one token pays for.
    static let rowsPerToken = 100

    /// The tokens a frame's body of `bytes` (after decompression) costs: one per whole ``bytesPerToken``.
    static func bodyTokens(_ bytes: Int) -> Int {
        bytes / bytesPerToken
    }

    /// The tokens `frame`, a request, costs beyond its body's.
    static func of(_ frame: Frame, limits: ProtocolLimits) -> Int {
        var cost = 1
        if frame.kind == .queryDeliveries,
            let query = try? frame.decode(Pushrelay_V1_QueryDeliveries.self, limits: limits)
        {
            cost += rowCost(limit: query.limit)
        } else if frame.kind == .listDevices,
            let list = try? frame.decode(Pushrelay_V1_ListDevices.self, limits: limits)
        {
            cost += rowCost(limit: list.limit)
        }
        return cost
    }

    /// The tokens beyond the first that a page of `limit` rows costs (a limit of 0 reads the default 100).
    private static func rowCost(limit: UInt32) -> Int {
        // A limit above the most a page may ask for is refused by validation, for one token.
        let rows = limit == 0 || limit > FieldRules.maximumQueryLimit ? rowsPerToken : Int(limit)
        return (rows - 1) / rowsPerToken
    }
}
