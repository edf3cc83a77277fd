import APNs
import Foundation
import NIOCore
import NIOHPACK
import Synchronization

/// The headers of a request that APNs looks at, gathered in one pass.
struct RequestHead {
    var method: String?
    var path: String?
    var authorization: String?
    var topic: String?
    var pushType: String?
    var priority: String?
    var collapseID: String?
    var apnsID: String?
    var expiration: String?
    /// True when one of the headers above appears more than once.
    var hasDuplicates = false

    init(_ headers: HPACKHeaders) {
        var duplicates = false
        func set(_ field: inout String?, _ value: String) {
            if field != nil { duplicates = true }
            field = value
        }
        for (name, value, _) in headers {
            switch name {
            case ":method": set(&method, value)
            case ":path": set(&path, value)
            case "authorization": set(&authorization, value)
            case "apns-topic": set(&topic, value)
            case "apns-push-type": set(&pushType, value)
            case "apns-priority": set(&priority, value)
            case "apns-collapse-id": set(&collapseID, value)
            case "apns-id": set(&apnsID, value)
            case "apns-expiration": set(&expiration, value)
            default: continue
            }
        }
        hasDuplicates = duplicates
    }
}

/// A request's body as received: the first bytes (up to a limit) and the full size.
struct RequestPayload {
    /// More than the largest payload APNs accepts: enough to answer and to record any valid request.
    static let retainedLimit = 8192

    /// The received bytes, up to ``retainedLimit`` (more only when they came in one frame).
    private(set) var bytes: ByteBuffer?
    /// How many bytes the body has.
    private(set) var size = 0

    /// Adds the bytes of a DATA frame.
    mutating func append(_ buffer: ByteBuffer) {
        size += buffer.readableBytes
        guard bytes != nil else {
            bytes = buffer
            return
        }
        if size <= Self.retainedLimit {
            bytes!.writeImmutableBuffer(buffer)
        }
    }
}

/// How the simulator answers one request, before faults.
struct Verdict {
    var status = 200
    var reason: APNsReason?
    /// The device token from the path, when it has one.
    var deviceToken: String?
    /// The provider token's claims, when one verified.
    var token: VerifiedProviderToken?
    /// True when the token verified and was not the one presented before it on this connection.
    var tokenNewlyPresented = false
    /// True when the payload is not a JSON object.
    var invalidJSON = false

    mutating func refuse(_ reason: APNsReason) {
        status = reason.status ?? 400
        self.reason = reason
    }
}

/// Judges requests the way APNs does, in the order APNs's answers suggest: method, path and device token,
/// headers, credentials, topic and push type, the other `apns-` headers, then the payload.
struct RequestValidator: Sendable {
    let verifier: ProviderTokenVerifier
    /// Allowed bundle ids; empty allows any.
    let topics: Set<String>
    /// Parse payloads with `JSONSerialization` rather than only looking at their first and last bytes.
    let strictJSON: Bool
    /// Payloads already parsed and found to be JSON objects: a fan-out sends one payload many times.
    let validPayloads = PayloadMemory()

    private static let pathPrefix = "/3/device/"

    /// The verdict on a request, updating the connection's credentials at `now`.
    ///
    /// A payload that is not a JSON object gets 400 PayloadEmpty: Apple's table has no reason for malformed
    /// JSON, and PayloadEmpty ("the message payload is empty") is the closest; the statistics count it
    /// separately as ``APNsSimulatorStatistics/invalidJSONPayloads``.
    func judge(
        _ head: RequestHead, payload: RequestPayload, credentials: inout ConnectionCredentials, now: Date
    ) -> Verdict {
        var verdict = Verdict()
        guard head.method == "POST" else {
            verdict.refuse(.methodNotAllowed)
            return verdict
        }
        let path = head.path ?? ""
        if path == "/3/device" || path == Self.pathPrefix {
            verdict.refuse(.missingDeviceToken)
            return verdict
        }
        guard path.hasPrefix(Self.pathPrefix) else {
            verdict.refuse(.badPath)
            return verdict
        }
        let deviceToken = String(path.dropFirst(Self.pathPrefix.count))
        verdict.deviceToken = deviceToken
        if (try? APNsNotification.validateDeviceToken(deviceToken)) == nil {
            verdict.refuse(.badDeviceToken)
            return verdict
        }
        if head.hasDuplicates {
            verdict.refuse(.duplicateHeaders)
            return verdict
        }
        let certificateTopic: String?
        switch credentials.mode {
        case .certificate(let topic):
            guard let topic else {
                verdict.refuse(.badCertificate)
                return verdict
            }
            certificateTopic = topic
        case .token, .undetermined:
            certificateTopic = nil
            let check = credentials.check(head.authorization, at: now, verifier: verifier)
            verdict.token = check.claims
            verdict.tokenNewlyPresented = check.newlyPresented
            switch check.refusal {
            case nil: break
            case .missing: verdict.refuse(.missingProviderToken)
            case .invalid: verdict.refuse(.invalidProviderToken)
            case .expired: verdict.refuse(.expiredProviderToken)
            case .otherTeam: verdict.refuse(.unrelatedKeyIdInToken)
            case .updatedTooSoon: verdict.refuse(.tooManyProviderTokenUpdates)
            }
            if verdict.reason != nil { return verdict }
        }
        guard let topic = head.topic, !topic.isEmpty else {
            verdict.refuse(.missingTopic)
            return verdict
        }
        guard let pushType = APNsPushType(rawValue: head.pushType ?? APNsPushType.alert.rawValue) else {
            verdict.refuse(.invalidPushType)
            return verdict
        }
        if let reason = topicProblem(topic, pushType: pushType, certificateTopic: certificateTopic) {
            verdict.refuse(reason)
            return verdict
        }
        if let priority = head.priority {
            let allowed = priority == "10" || priority == "5" || priority == "1"
            if !allowed || (pushType == .background && priority == "10") {
                verdict.refuse(.badPriority)
                return verdict
            }
        }
        if let collapseID = head.collapseID, collapseID.utf8.count > 64 {
            verdict.refuse(.badCollapseId)
            return verdict
        }
        if let apnsID = head.apnsID, UUID(uuidString: apnsID) == nil {
            verdict.refuse(.badMessageId)
            return verdict
        }
        if let expiration = head.expiration, Int64(expiration) == nil {
            verdict.refuse(.badExpirationDate)
            return verdict
        }
        if payload.size == 0 {
            verdict.refuse(.payloadEmpty)
        } else if payload.size > pushType.maximumPayloadSize {
            verdict.refuse(.payloadTooLarge)
        } else if let bytes = payload.bytes, !isJSONObject(bytes) {
            verdict.invalidJSON = true
            verdict.refuse(.payloadEmpty)
        }
        return verdict
    }

    /// Why `topic` does not fit `pushType` and the credentials, if it does not.
    ///
    /// The topic must be an allowed bundle id (with a client certificate: the certificate's topic) plus the
    /// push type's suffix; `mdm` takes any topic with tokens. A topic of an allowed app with another push
    /// type's suffix is BadTopic, a topic of another app TopicDisallowed. With no allowed list, an
    /// `alert` or `background` topic that ends in another push type's suffix is BadTopic too: that is how a
    /// forgotten push type shows.
    private func topicProblem(_ topic: String, pushType: APNsPushType, certificateTopic: String?) -> APNsReason? {
        func isAllowed(_ base: Substring) -> Bool {
            if let certificateTopic { return base == certificateTopic }
            return topics.isEmpty || topics.contains(String(base))
        }
        if pushType == .mdm { return certificateTopic == nil || topic == certificateTopic ? nil : .topicDisallowed }
        let suffix = pushType.topicSuffix
        guard topic.hasSuffix(suffix), topic.utf8.count > suffix.utf8.count else { return .badTopic }
        let otherSuffixes = APNsPushType.allCases.lazy.map(\.topicSuffix).filter { !$0.isEmpty && $0 != suffix }
        if isAllowed(topic.dropLast(suffix.count)) {
            let guarded = suffix.isEmpty && topics.isEmpty && certificateTopic == nil
            return guarded && otherSuffixes.contains(where: { topic.hasSuffix($0) }) ? .badTopic : nil
        }
        let fitsOtherPushType = otherSuffixes.contains { topic.hasSuffix($0) && isAllowed(topic.dropLast($0.count)) }
        return fitsOtherPushType ? .badTopic : .topicDisallowed
    }

    /// Whether `bytes` are a JSON object: parsed when ``strictJSON`` is set, otherwise only the first and last
    /// bytes other than whitespace are checked to be `{` and `}`.
    private func isJSONObject(_ bytes: ByteBuffer) -> Bool {
        let view = bytes.readableBytesView
        let isSpace = { (byte: UInt8) in byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 }
        guard let first = view.first(where: { !isSpace($0) }), let last = view.last(where: { !isSpace($0) }),
            first == UInt8(ascii: "{"), last == UInt8(ascii: "}")
        else { return false }
        guard strictJSON else { return true }
        if validPayloads.contains(bytes) { return true }
        guard (try? APNsNotification.validateJSONPayload(Array(view))) != nil else { return false }
        validPayloads.insert(bytes)
        return true
    }
}

/// The last few payloads found valid, by content: the same bytes get the same verdict without being parsed
/// again.
final class PayloadMemory: Sendable {
    private let payloads = Mutex<Set<ByteBuffer>>([])
    /// Payloads remembered before the memory starts again.
    static let capacity = 64

    /// Whether `payload` was found valid before.
    func contains(_ payload: ByteBuffer) -> Bool {
        payloads.withLock { $0.contains(payload) }
    }

    /// Remembers `payload` as valid.
    func insert(_ payload: ByteBuffer) {
        payloads.withLock { payloads in
            if payloads.count >= Self.capacity { payloads.removeAll(keepingCapacity: true) }
            payloads.insert(payload)
        }
    }
}
