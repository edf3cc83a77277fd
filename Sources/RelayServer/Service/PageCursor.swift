import Foundation
import PushRelayProtocol
import RelayStore

/// The `next_cursor` of a paged answer (QUERY_DELIVERIES, LIST_DEVICES) and the `cursor` of the request for the page
/// after it: the last row's place in the answer's order, opaque to clients (base64url, no padding). A cursor names
/// rows of its tenant's answer only: the query it is used with is still scoped to the caller's tenant.
enum PageCursor {
    /// Between the parts of a cursor: ids and tokens may not contain control characters.
    private static let separator: Character = "\u{1F}"

    /// The cursor after `record`.
    static func after(_ record: DeliveryRecord) -> String {
        let key = DeliveryKey(after: record)
        return encode(["\(key.sentAtMicroseconds)", "\(key.attempt)", key.jobID, key.userID, key.token])
    }

    /// The cursor after `device`.
    static func after(_ device: DeviceRecord) -> String {
        encode(["\(DeviceKey(after: device).registeredAtMicroseconds)", device.token])
    }

    /// The delivery key `cursor` names (`nil` for an empty cursor: the first page); `INVALID_ARGUMENT` on `field`
    /// when it is not one the relay gave.
    static func deliveryKey(_ cursor: String, field: String) throws(ProtocolError) -> DeliveryKey? {
        guard !cursor.isEmpty else { return nil }
        let parts = try decode(cursor, count: 5, field: field)
        guard let micros = Int64(parts[0]), let attempt = Int(parts[1]) else { throw invalid(field) }
        return DeliveryKey(
            sentAtMicroseconds: micros, attempt: attempt, jobID: parts[2], userID: parts[3], token: parts[4])
    }

    /// The device key `cursor` names (`nil` for an empty cursor); `INVALID_ARGUMENT` on `field` when it is not one
    /// the relay gave.
    static func deviceKey(_ cursor: String, field: String) throws(ProtocolError) -> DeviceKey? {
        guard !cursor.isEmpty else { return nil }
        let parts = try decode(cursor, count: 2, field: field)
        guard let micros = Int64(parts[0]) else { throw invalid(field) }
        return DeviceKey(registeredAtMicroseconds: micros, token: parts[1])
    }

    private static func encode(_ parts: [String]) -> String {
        Data(parts.joined(separator: String(separator)).utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    private static func decode(_ cursor: String, count: Int, field: String) throws(ProtocolError) -> [String] {
        var base64 = cursor.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let data = Data(base64Encoded: base64), let text = String(data: data, encoding: .utf8) else {
            throw invalid(field)
        }
        let parts = text.split(separator: separator, omittingEmptySubsequences: false).map(String.init)
        guard parts.count == count else { throw invalid(field) }
        return parts
    }

    private static func invalid(_ field: String) -> ProtocolError {
        .invalidArgument(field, "\(field) is not a next_cursor the relay gave")
    }
}
