import PushRelayProtocol

/// What a frame costs against its credential's request limit (`requests_per_second`, `request_burst`).
///
/// Every frame after HELLO pays one token, plus one per whole 64 KiB of its body after decompression, taken before
/// it is decompressed (``frameTokens(bodyBytes:)``): a tiny zstd frame does not buy megabytes of work, and a PING or
/// a frame refused for its body pays too. QUERY_DELIVERIES and LIST_DEVICES pay one more token per 10 rows their
/// `limit` allows beyond the first 10 (``rowTokens(of:limits:)``: a page of 1,000 rows costs 100, the default 100
/// costs 10), since answering rows is what costs the relay. A write to the device registry or to users' policy
/// (REGISTER_DEVICE, UNREGISTER_DEVICE, SET_PREFERENCES, SET_MUTE, CLEAR_MUTE, SET_PRESENCE) pays one more token
/// (``writeTokens(of:)``): its statement costs the relay and PostgreSQL about ten times a PING, and a tenant
/// registering at its whole limit took three quarters of a core between them in the noisy-neighbour benchmark. A
/// SEND's work is paced by its tenant's `notifications_per_second`. Never more than the burst at once, so every
/// frame can be admitted.
enum RequestCost {
    /// Body bytes (after decompression) that one token pays for.
    static let bytesPerToken = 65_536
    /// Delivery or device rows that one token pays for.
    static let rowsPerToken = 10

    /// The tokens a frame whose body has `bodyBytes` once decompressed costs: one, plus one per whole
    /// ``bytesPerToken``.
    static func frameTokens(bodyBytes: Int) -> Int {
        1 + bodyBytes / bytesPerToken
    }

    /// The tokens `frame`, a request, costs for the rows it may read: 0 but for a page of deliveries or devices.
    static func rowTokens(of frame: Frame, limits: ProtocolLimits) -> Int {
        if frame.kind == .queryDeliveries,
            let query = try? frame.decode(Pushrelay_V1_QueryDeliveries.self, limits: limits)
        {
            return rowCost(limit: query.limit)
        } else if frame.kind == .listDevices,
            let list = try? frame.decode(Pushrelay_V1_ListDevices.self, limits: limits)
        {
            return rowCost(limit: list.limit)
        }
        return 0
    }

    /// The tokens a frame of `kind` costs, beyond ``frameTokens(bodyBytes:)`` and with them, for writing to the
    /// device registry or to users' policy: 1 for those requests, 0 for every other frame.
    static func writeTokens(of kind: FrameKind) -> Int {
        switch kind {
        case .registerDevice, .unregisterDevice, .setPreferences, .setMute, .clearMute, .setPresence: 1
        default: 0
        }
    }

    /// The tokens a page of `limit` rows costs beyond the frame's (a limit of 0 reads the default 100).
    private static func rowCost(limit: UInt32) -> Int {
        // A limit above the most a page may ask for is refused by validation, for the frame's token.
        let rows = limit == 0 || limit > FieldRules.maximumQueryLimit ? Int(FieldRules.defaultQueryLimit) : Int(limit)
        return (rows - 1) / rowsPerToken
    }
}
