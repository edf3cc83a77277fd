import NIOHPACK

/// RFC 9113's rules for a received header block (sections 8.2 and 8.3), checked on the fields' UTF-8 bytes in one
/// pass: a block that breaks one makes the request malformed, and the simulator resets its stream with
/// PROTOCOL_ERROR without answering it, as APNs's HTTP/2 layer does.
///
/// The simulator runs NIOHTTP2 with its own header-block validation off and applies these rules instead. They are
/// NIOHTTP2's (1.46) for a server: a valid lowercase token as every name; pseudo-header fields first, known, once
/// each, with `:method`, `:scheme` and a non-empty `:path` present (`:method` and `:authority` only for CONNECT);
/// no connection-specific field, `te` only as `trailers`; no NUL, CR or LF in a value, no control byte, space or
/// DEL in a pseudo-header's value; no pseudo-header field in trailers. NIOHTTP2's checks work on `String`s field by
/// field and also check the simulator's own answers: they were a tenth of the simulator's CPU per request.
enum HeaderBlockRules {
    /// The pseudo-header fields of a request, as bits.
    private struct PseudoHeaders: OptionSet {
        let rawValue: UInt8
        static let method = PseudoHeaders(rawValue: 1 << 0)
        static let scheme = PseudoHeaders(rawValue: 1 << 1)
        static let path = PseudoHeaders(rawValue: 1 << 2)
        static let authority = PseudoHeaders(rawValue: 1 << 3)
    }

    /// Why `headers`, a request's first header block, is malformed; `nil` when it is well formed.
    static func requestViolation(_ headers: HPACKHeaders) -> String? {
        var seen: PseudoHeaders = []
        var regularFieldSeen = false
        var isConnect = false
        for (name, value, _) in headers {
            let bytes = name.utf8
            guard bytes.first == UInt8(ascii: ":") else {
                regularFieldSeen = true
                if let violation = regularFieldViolation(name: name, value: value) { return violation }
                if bytes.count == 2, name == "te", value != "trailers" { return "te other than trailers" }
                continue
            }
            guard !regularFieldSeen else { return "pseudo-header field \(name) after a regular field" }
            let field: PseudoHeaders
            switch name {
            case ":method": field = .method
            case ":scheme": field = .scheme
            case ":path": field = .path
            case ":authority": field = .authority
            default: return "unknown pseudo-header field \(name)"
            }
            guard !seen.contains(field) else { return "duplicate pseudo-header field \(name)" }
            seen.insert(field)
            guard isValidPseudoHeaderValue(value) else { return "invalid value of \(name)" }
            if field == .path, value.isEmpty { return "empty :path" }
            if field == .method { isConnect = value == "CONNECT" }
        }
        let (allowed, mandatory): (PseudoHeaders, PseudoHeaders) =
            isConnect
            ? ([.method, .authority], [.method, .authority])
            : ([.method, .scheme, .path, .authority], [.method, .scheme, .path])
        guard seen.isSubset(of: allowed), seen.isSuperset(of: mandatory) else {
            return "missing or disallowed pseudo-header fields"
        }
        return nil
    }

    /// Why `headers`, a request's trailers, are malformed; `nil` when they are well formed.
    static func trailersViolation(_ headers: HPACKHeaders) -> String? {
        for (name, value, _) in headers {
            guard name.utf8.first != UInt8(ascii: ":") else { return "pseudo-header field \(name) in trailers" }
            if let violation = regularFieldViolation(name: name, value: value) { return violation }
        }
        return nil
    }

    /// Why a regular field is not allowed: a name that is no lowercase token, a connection-specific field, or NUL,
    /// CR or LF in the value.
    private static func regularFieldViolation(name: String, value: String) -> String? {
        guard isLowercaseToken(name.utf8) else { return "invalid field name" }
        switch name.utf8.count {
        case 7, 10, 16, 17:
            if name == "upgrade" || name == "keep-alive" || name == "connection" || name == "proxy-connection"
                || name == "transfer-encoding"
            {
                return "connection-specific field \(name)"
            }
        default: break
        }
        for byte in value.utf8 where byte == 0 || byte == UInt8(ascii: "\r") || byte == UInt8(ascii: "\n") {
            return "NUL, CR or LF in the value of \(name)"
        }
        return nil
    }

    /// Whether `bytes` (a name, or a pseudo-header's name after its colon) are one or more `tchar`s of RFC 9110 but
    /// uppercase letters.
    private static func isLowercaseToken(_ bytes: String.UTF8View) -> Bool {
        var count = 0
        for byte in bytes {
            count += 1
            switch byte {
            case 0x21, 0x23...0x27, 0x2A, 0x2B, 0x2D, 0x2E, 0x30...0x39, 0x5E...0x7A, 0x7C, 0x7E: continue
            default: return false
            }
        }
        return count > 0
    }

    /// Whether a pseudo-header's value has no control byte, space or DEL.
    private static func isValidPseudoHeaderValue(_ value: String) -> Bool {
        for byte in value.utf8 where byte <= 0x20 || byte == 0x7F { return false }
        return true
    }
}
