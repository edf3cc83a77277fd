/// A host and a TCP port, read from `host:port` text: how every address of the package is read (`serve`'s listen,
/// metrics listen and APNs endpoint, `send --relay`, `apns push --endpoint`, the relay's ready file).
///
/// The port is the digits after the last colon, 1 to 65535 (or 0 where a listener may pick a free port); the host is
/// what stands before it and must not be empty. An IPv6 address is written in brackets, `[::1]:7411`, and read
/// without them; one without brackets is refused, as its last group would be taken for the port.
///
/// The APNs module, which depends on no module of the relay, reads its `APNsEndpoint(parsing:)` by the same rules.
package struct HostAndPort: Hashable, Sendable, CustomStringConvertible {
    /// The host name or address, an IPv6 address without brackets.
    package var host: String
    /// The TCP port.
    package var port: Int

    /// A host and a port as they are.
    package init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Reads `text` as `host:port` or `[IPv6]:port`.
    ///
    /// - Parameters:
    ///   - text: The address.
    ///   - allowingPortZero: Whether port 0 is allowed: a listener's address, where it picks a free port.
    /// - Throws: ``HostAndPortError``, saying what is wrong.
    package init(parsing text: String, allowingPortZero: Bool = false) throws(HostAndPortError) {
        func refuse(_ reason: String) -> HostAndPortError { HostAndPortError(text: text, reason: reason) }
        guard let colon = text.lastIndex(of: ":") else { throw refuse("it has no :port") }
        let portText = text[text.index(after: colon)...]
        let ports = (allowingPortZero ? 0 : 1)...65535
        guard !portText.isEmpty else { throw refuse("no port follows the colon") }
        guard portText.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        else { throw refuse("the port '\(portText)' is not a number") }
        guard let port = Int(portText), ports.contains(port) else {
            throw refuse("the port \(portText) is not \(ports.lowerBound) to 65535")
        }
        var host = text[..<colon]
        let bracketed = host.count >= 2 && host.first == "[" && host.last == "]"
        if bracketed { host = host.dropFirst().dropLast() }
        guard !host.contains("["), !host.contains("]") else { throw refuse("the host's brackets are unbalanced") }
        guard bracketed || !host.contains(":") else {
            throw refuse("an IPv6 address goes in brackets: [\(host)]:\(portText)")
        }
        guard !host.isEmpty else { throw refuse("the host is empty") }
        self.init(host: String(host), port: port)
    }

    /// `host:port`, an IPv6 address in brackets (`[::1]:7411`): what ``init(parsing:allowingPortZero:)`` reads back.
    package var description: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}

/// Why a text is not `host:port`.
package struct HostAndPortError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The text that was read.
    package var text: String
    /// What is wrong with it (`the port 99999 is not 1 to 65535`).
    package var reason: String

    /// The error for `text`, wrong as `reason` says.
    package init(text: String, reason: String) {
        self.text = text
        self.reason = reason
    }

    /// `'TEXT' is not host:port: REASON`.
    package var description: String { "'\(text)' is not host:port: \(reason)" }
}
