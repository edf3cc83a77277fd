public import APNs
public import Foundation
import NIOCore

/// The OAuth 2.0 JWT-bearer grant as requests and answers: the `POST` to a service account's `token_uri` that
/// trades a signed assertion (``FCMAccessAssertion``) for an access token, and what Google's answer says.
public enum AccessTokenGrant {
    /// Where a service account's tokens come from: the host and port of its `token_uri`, and its path.
    public struct Endpoint: Sendable, Hashable {
        /// The token endpoint's host and port (443 unless the URI names one).
        public var endpoint: APNsEndpoint
        /// The URI's path (`/token`), with its query if it has one.
        public var path: String

        /// The endpoint of `tokenURI`; `nil` unless it is an `https` URL with a host.
        public init?(tokenURI: String) {
            guard let url = URL(string: tokenURI), url.scheme == "https", let host = url.host, !host.isEmpty else {
                return nil
            }
            let path = url.path.isEmpty ? "/" : url.path
            self.endpoint = APNsEndpoint(host: host, port: url.port ?? 443)
            self.path = url.query.map { path + "?" + $0 } ?? path
        }
    }

    /// What a token endpoint answered.
    public enum Answer: Sendable, Hashable {
        /// A token, valid for `expiresIn`.
        case token(String, expiresIn: Duration)
        /// The endpoint refused the grant (`invalid_grant`: a key Google no longer knows, a clock out of step;
        /// `invalid_scope`, `unauthorized_client`): only an operator fixes it.
        case refused(String)
        /// The endpoint could not answer now (429, 5xx): try again later.
        case unavailable(String)
    }

    /// The form-encoded request of a token for `account`, signed at `now`, to `endpoint`.
    public static func request(for account: FCMServiceAccount, to endpoint: Endpoint, now: Date) -> HTTP2Request {
        let assertion = FCMAccessAssertion.make(for: account, issuedAt: now)
        let form = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"
        return HTTP2Request(
            path: endpoint.path,
            headers: [.init(name: "content-type", value: "application/x-www-form-urlencoded")],
            body: ByteBuffer(string: form))
    }

    /// What an answer of `status` with `body` says.
    public static func answer(status: Int, body: Data) -> Answer {
        if status == 200 {
            guard let token = try? JSONDecoder().decode(TokenBody.self, from: body), !token.accessToken.isEmpty,
                token.expiresIn > 0
            else {
                return .unavailable("the token endpoint's answer has no access_token and expires_in")
            }
            return .token(token.accessToken, expiresIn: .seconds(token.expiresIn))
        }
        let error = try? JSONDecoder().decode(ErrorBody.self, from: body)
        let reason = [error?.error, error?.errorDescription].compactMap { $0 }.joined(separator: ": ")
        let text = reason.isEmpty ? "HTTP \(status)" : "HTTP \(status) \(reason)"
        return status == 429 || status >= 500 ? .unavailable(text) : .refused(text)
    }

    private struct TokenBody: Decodable {
        var accessToken: String
        var expiresIn: Int

        enum CodingKeys: String, CodingKey {
            case accessToken = "access_token"
            case expiresIn = "expires_in"
        }
    }

    private struct ErrorBody: Decodable {
        var error: String?
        var errorDescription: String?

        enum CodingKeys: String, CodingKey {
            case error
            case errorDescription = "error_description"
        }
    }
}
