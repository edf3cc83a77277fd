import APNs
import APNsSimulator
import Foundation
import NIOConcurrencyHelpers

/// The state all connections of a simulator share, and the judgement of each request: the accounts, the access
/// tokens issued, the projects' quotas, the faults, the statistics and the recorded messages. Thread-safe.
///
/// Statistics are counted when an answer is decided, before it is written: a client never sees an answer the
/// statistics do not count yet.
final class FCMSimulatorCore: Sendable {
    /// What the lock guards.
    private struct Shared {
        /// The faults in force.
        var faults: FCMSimulatorFaults
        /// The accounts accepted.
        var accounts: [FCMSimulatorAccount]
        /// The access tokens issued.
        var ledger = AccessTokenLedger()
        /// The projects' minutes.
        var quota = ProjectQuota()
        /// The counters.
        var statistics = FCMSimulatorStatistics()
        /// Recorded messages; trimmed to the last `recordLimit` once it holds twice as many.
        var messages: [FCMSimulatorMessage] = []
        /// Makes access tokens and message ids (not seeded: they must not repeat across runs).
        var random = SystemRandomNumberGenerator()
    }

    /// The prefix and suffix of a send path: `/v1/projects/{project}/messages:send`.
    private static let sendPath = (prefix: "/v1/projects/", suffix: "/messages:send")

    /// The clock assertions, tokens, quotas and messages are judged by.
    let clock: any APNsClock
    /// The seed each connection's fault generator is derived from.
    let seed: UInt64
    /// Seconds an access token is valid.
    private let tokenLifetime: Int
    /// Whether messages are recorded.
    private let records: Bool
    /// How many messages are kept.
    private let recordLimit: Int
    /// Judges message bodies.
    private let validator = FCMRequestValidator()
    /// The state connections share.
    private let shared: NIOLockedValueBox<Shared>

    /// The core of a simulator started with `configuration`.
    init(configuration: FCMSimulatorConfiguration) {
        clock = configuration.clock
        seed = configuration.seed ?? UInt64.random(in: .min ... .max)
        tokenLifetime = configuration.accessTokenLifetime
        records = configuration.recordMessages
        recordLimit = max(configuration.recordLimit, 1)
        shared = NIOLockedValueBox(Shared(faults: configuration.faults, accounts: configuration.accounts))
    }

    /// Counts a new connection and returns its id (1, 2, ...).
    func connectionAccepted() -> Int {
        shared.withLockedValue {
            $0.statistics.connectionsAccepted += 1
            return $0.statistics.connectionsAccepted
        }
    }

    /// The faults in force.
    var faults: FCMSimulatorFaults { shared.withLockedValue { $0.faults } }

    /// Changes the faults in force.
    func updateFaults(_ update: (inout FCMSimulatorFaults) -> Void) {
        shared.withLockedValue { update(&$0.faults) }
    }

    /// Accepts `account` from now on (replacing one with the same key id).
    func add(_ account: FCMSimulatorAccount) {
        shared.withLockedValue { shared in
            shared.accounts.removeAll { $0.keyID == account.keyID }
            shared.accounts.append(account)
        }
    }

    /// Refuses every access token issued so far.
    func revokeAccessTokens() {
        shared.withLockedValue { $0.ledger.revokeAll() }
    }

    /// The statistics so far.
    var statistics: FCMSimulatorStatistics { shared.withLockedValue { $0.statistics } }

    /// The last recorded messages, oldest first.
    var recordedMessages: [FCMSimulatorMessage] {
        shared.withLockedValue { Array($0.messages.suffix(recordLimit)) }
    }

    /// Forgets statistics and recorded messages (tokens issued stay valid; connections are not counted again).
    func reset() {
        shared.withLockedValue {
            $0.statistics = FCMSimulatorStatistics()
            $0.messages = []
        }
    }

    /// Counts a connection-level event in the statistics.
    func count(_ update: (inout FCMSimulatorStatistics) -> Void) {
        shared.withLockedValue { update(&$0.statistics) }
    }

    /// The answer to one complete request of connection `connectionID`, drawing random faults from `random`.
    /// `shapes` are the connection's bodies already judged (``ValidatedShapes``).
    func answer(
        method: String, path: String, authorization: String?, body: [UInt8], connectionID: Int,
        random: inout SplitMix64, shapes: inout ValidatedShapes
    ) -> FCMSimulatorAnswer {
        let now = clock.now()
        let answer: FCMSimulatorAnswer
        var record: FCMSimulatorMessage?
        if method == "POST", path == "/token" {
            answer = grant(body, now: now)
        } else if method == "POST", let project = Self.project(inPath: path) {
            (answer, record) = send(
                project: project, authorization: authorization, body: body, connectionID: connectionID, now: now,
                random: &random, shapes: &shapes)
        } else {
            answer = .notFound(method: method, path: path)
        }
        shared.withLockedValue { shared in
            shared.statistics.requestsReceived += 1
            shared.statistics.responsesByStatus[answer.status, default: 0] += 1
            if let code = answer.errorCode { shared.statistics.responsesByErrorCode[code, default: 0] += 1 }
            if records, let record {
                shared.messages.append(record)
                if shared.messages.count >= 2 * recordLimit {
                    shared.messages.removeFirst(shared.messages.count - recordLimit)
                }
            }
        }
        return answer
    }

    /// The token endpoint: verifies the grant (outside the lock: RSA), then issues and counts a token.
    private func grant(_ body: [UInt8], now: Date) -> FCMSimulatorAnswer {
        let verifier = TokenGrantVerifier(accounts: shared.withLockedValue { $0.accounts })
        switch verifier.verify(formBody: body, now: now) {
        case .refused(let answer):
            return answer
        case .granted(let account):
            let token = shared.withLockedValue { shared in
                let token = AccessTokenLedger.makeToken(using: &shared.random)
                shared.ledger.record(token, for: account, now: now, lifetime: tokenLifetime)
                shared.statistics.accessTokensIssued[account.clientEmail, default: 0] += 1
                return token
            }
            return .accessToken(token, expiresIn: tokenLifetime)
        }
    }

    /// The token of an `authorization` header `Bearer <token>` (the scheme in any case), or `nil`.
    static func bearerToken(_ authorization: String) -> String? {
        let scheme = Array("bearer ".utf8)
        let bytes = authorization.utf8
        guard bytes.count > scheme.count, zip(bytes, scheme).allSatisfy({ $0 | 0x20 == $1 }) else { return nil }
        return String(authorization.utf8.dropFirst(scheme.count))
    }

    /// `messages:send` for `project`: the access token, the account's project, the message, then the faults and
    /// the quota, in that order.
    private func send(
        project: String, authorization: String?, body: [UInt8], connectionID: Int, now: Date,
        random: inout SplitMix64, shapes: inout ValidatedShapes
    ) -> (FCMSimulatorAnswer, FCMSimulatorMessage?) {
        let bearer = authorization.flatMap(Self.bearerToken)
        let (grant, faults) = shared.withLockedValue { shared in
            (bearer.flatMap { shared.ledger.grant(of: $0, now: now) }, shared.faults)
        }
        guard let grant else { return (.unauthenticated, nil) }
        guard grant.account.projectID == project else { return (.permissionDenied(project: project), nil) }
        var message = FCMSimulatorMessage(
            connectionID: connectionID, projectID: project, clientEmail: grant.account.clientEmail, receivedAt: now)
        var answer =
            validator.validate(body, into: &message, shapes: &shapes) ?? tokenFault(message.token, faults: faults)
            ?? randomFault(faults, random: &random)
        if answer == nil, !message.validateOnly {
            let retryAfter = shared.withLockedValue {
                $0.quota.admit(project: project, now: now, limit: faults.messagesPerMinute)
            }
            answer = retryAfter.map { .quotaExceeded(retryAfter: $0) }
        }
        if let answer {
            message.status = answer.status
            message.errorCode = answer.errorCode
            return (answer, message)
        }
        let name = messageName(project: project, now: now, validateOnly: message.validateOnly)
        message.name = name
        if !message.validateOnly {
            shared.withLockedValue { $0.statistics.messagesSent[project, default: 0] += 1 }
        }
        return (.sent(name: name), message)
    }

    /// The scripted answer of a registration token, if it has one.
    private func tokenFault(_ token: String?, faults: FCMSimulatorFaults) -> FCMSimulatorAnswer? {
        guard let token else { return nil }
        if faults.unregisteredTokens.contains(token) { return .unregistered }
        if faults.invalidTokens.contains(token) { return .invalidRegistrationToken }
        if faults.senderIDMismatchTokens.contains(token) { return .senderIDMismatch }
        if faults.thirdPartyAuthErrorTokens.contains(token) { return .thirdPartyAuthError }
        return nil
    }

    /// A random 503, 500 or 429, drawn with the configured rates.
    private func randomFault(_ faults: FCMSimulatorFaults, random: inout SplitMix64) -> FCMSimulatorAnswer? {
        guard faults.rate503 > 0 || faults.rate500 > 0 || faults.rate429 > 0 else { return nil }
        let draw = Double.random(in: 0..<1, using: &random)
        if draw < faults.rate503 { return .unavailable(retryAfter: faults.retryAfter503) }
        if draw < faults.rate503 + faults.rate500 { return .internalError }
        if draw < faults.rate503 + faults.rate500 + faults.rate429 {
            return .quotaExceeded(retryAfter: faults.retryAfter429)
        }
        return nil
    }

    /// `projects/{project}/messages/0:{microseconds}%{16 hex}` like Google's, or Google's `fake_message_id` for a
    /// `validate_only` request.
    private func messageName(project: String, now: Date, validateOnly: Bool) -> String {
        guard !validateOnly else { return "projects/\(project)/messages/fake_message_id" }
        let micros = Int64(now.timeIntervalSince1970 * 1_000_000)
        let hex = String(shared.withLockedValue { $0.random.next() as UInt64 }, radix: 16)
        let suffix = String(repeating: "0", count: 16 - hex.utf8.count) + hex
        return "projects/\(project)/messages/0:\(micros)%\(suffix)"
    }

    /// The `{project}` of `/v1/projects/{project}/messages:send`, or nil for another path.
    static func project(inPath path: String) -> String? {
        guard path.hasPrefix(sendPath.prefix), path.hasSuffix(sendPath.suffix) else { return nil }
        let project = path.dropFirst(sendPath.prefix.count).dropLast(sendPath.suffix.count)
        guard !project.isEmpty, !project.contains("/") else { return nil }
        return String(project)
    }
}
