import PushRelayProtocol

/// What a request costs against its credential's request limit (`requests_per_second`, `request_burst`): one token,
/// plus one per 64 KiB of its body after decompression (a tiny zstd frame does not buy megabytes of work), plus,
/// for QUERY_DELIVERIES and LIST_DEVICES, one per 100 rows it may read beyond the first 100 (a page of 1,000 rows
/// costs 10, not 1).
/// Never more than the burst, so every request can be admitted.
enum RequestCost {
    /// Body bytes (after decompression) that one token pays for.
    static let bytesPerToken = 65_536
    /// Delivery rows that one token pays for.
    static let rowsPerToken = 100

    /// The tokens `frame` costs.
    static func of(_ frame: Frame) -> Int {
        var cost = 1 + frame.body.readableBytes / bytesPerToken
        if frame.kind == .queryDeliveries, let query = try? frame.decode(Pushrelay_V1_QueryDeliveries.self) {
            cost += rowCost(limit: query.limit)
        } else if frame.kind == .listDevices, let list = try? frame.decode(Pushrelay_V1_ListDevices.self) {
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
