import APNs
import Foundation
import NIOConcurrencyHelpers

/// What one connection did since it last reported: collected on its event loop without locks, and merged
/// into the simulator's statistics once per read batch (before the batch's responses are flushed).
struct ConnectionReport {
    var requestsReceived = 0
    var responsesByStatus: [Int: Int] = [:]
    var responsesByReason: [APNsReason: Int] = [:]
    var invalidJSONPayloads = 0
    var tokenSightings: [APNsSimulatorTokenSighting] = []
    var goawaysSent = 0
    var streamsRefused = 0
    var streamsOverLimit = 0
    var connectionsDropped = 0
    var connectionsStalled = 0
    var requests: [APNsSimulatorRequest] = []

    /// True when there is nothing to report (invalid payloads and token sightings come with requests).
    var isEmpty: Bool {
        requestsReceived == 0 && responsesByStatus.isEmpty && goawaysSent == 0 && streamsRefused == 0
            && streamsOverLimit == 0 && connectionsDropped == 0 && connectionsStalled == 0
    }

    mutating func responded(status: Int, reason: APNsReason?) {
        responsesByStatus[status, default: 0] += 1
        if let reason { responsesByReason[reason, default: 0] += 1 }
    }
}

/// The state all connections of a simulator share: the settings fixed at start, the faults, the
/// statistics and the recorded requests. Thread-safe.
final class SimulatorCore: Sendable {
    private struct Shared {
        var faults: APNsSimulatorFaults
        var statistics = APNsSimulatorStatistics()
        /// Recorded requests; trimmed to the last `recordLimit` once it holds twice as many.
        var requests: [APNsSimulatorRequest] = []
    }

    let validator: RequestValidator
    let clock: any APNsClock
    let maxConcurrentStreams: Int
    let seed: UInt64
    /// Whether connections build ``APNsSimulatorRequest`` values (to record or to log them).
    let keepsRequests: Bool
    private let recordLimit: Int
    private let records: Bool
    private let log: RequestLog?
    private let shared: NIOLockedValueBox<Shared>

    init(configuration: APNsSimulatorConfiguration) throws {
        self.validator = RequestValidator(
            verifier: ProviderTokenVerifier(keys: configuration.keys),
            topics: Set(configuration.topics),
            strictJSON: configuration.strictJSON
        )
        self.clock = configuration.clock
        self.maxConcurrentStreams = configuration.maxConcurrentStreams
        self.seed = configuration.seed ?? UInt64.random(in: .min ... .max)
        self.records = configuration.recordRequests
        self.recordLimit = max(configuration.recordLimit, 1)
        self.log = try configuration.requestLogPath.map(RequestLog.init(path:))
        self.keepsRequests = configuration.recordRequests || configuration.requestLogPath != nil
        self.shared = NIOLockedValueBox(Shared(faults: configuration.faults))
    }

    /// Counts a new connection and returns its id (1, 2, ...).
    func connectionAccepted() -> Int {
        shared.withLockedValue {
            $0.statistics.connectionsAccepted += 1
            return $0.statistics.connectionsAccepted
        }
    }

    /// The faults in force.
    var faults: APNsSimulatorFaults {
        shared.withLockedValue { $0.faults }
    }

    /// Changes the faults in force.
    func updateFaults(_ update: (inout APNsSimulatorFaults) -> Void) {
        shared.withLockedValue { update(&$0.faults) }
    }

    /// The statistics so far.
    var statistics: APNsSimulatorStatistics {
        shared.withLockedValue { $0.statistics }
    }

    /// The last recorded requests, oldest first.
    var recordedRequests: [APNsSimulatorRequest] {
        shared.withLockedValue { Array($0.requests.suffix(recordLimit)) }
    }

    /// Forgets statistics and recorded requests (connections are not counted again).
    func reset() {
        shared.withLockedValue {
            $0.statistics = APNsSimulatorStatistics()
            $0.requests = []
        }
    }

    /// Adds what a connection reported to the statistics, and empties the report.
    func merge(_ report: inout ConnectionReport, connectionID: Int) {
        guard !report.isEmpty else { return }
        let requests = report.requests
        shared.withLockedValue { shared in
            shared.statistics.requestsReceived += report.requestsReceived
            shared.statistics.responsesByStatus.merge(report.responsesByStatus, uniquingKeysWith: +)
            shared.statistics.responsesByReason.merge(report.responsesByReason, uniquingKeysWith: +)
            shared.statistics.invalidJSONPayloads += report.invalidJSONPayloads
            if !report.tokenSightings.isEmpty {
                shared.statistics.tokensByConnection[connectionID, default: []]
                    .append(contentsOf: report.tokenSightings)
            }
            shared.statistics.goawaysSent += report.goawaysSent
            shared.statistics.streamsRefused += report.streamsRefused
            shared.statistics.streamsOverLimit += report.streamsOverLimit
            shared.statistics.connectionsDropped += report.connectionsDropped
            shared.statistics.connectionsStalled += report.connectionsStalled
            if records, !requests.isEmpty {
                shared.requests.append(contentsOf: requests)
                if shared.requests.count >= 2 * recordLimit {
                    shared.requests.removeFirst(shared.requests.count - recordLimit)
                }
            }
        }
        if let log, !requests.isEmpty { log.append(requests) }
        report = ConnectionReport()
    }

    /// Closes the request log.
    func close() throws {
        try log?.close()
    }
}

/// The JSON-lines request log: one line per answered request, appended to a file.
final class RequestLog: Sendable {
    /// One line of the log.
    private struct Line: Encodable {
        var connection: Int
        var stream: Int
        var method: String
        var path: String
        var deviceToken: String?
        var headers: [[String]]
        var keyID: String?
        var issuer: String?
        var issuedAt: Int64?
        var certificateTopic: String?
        var payload: String
        var apnsID: String
        var status: Int
        var reason: String?
        /// Milliseconds since 1970, by the simulator's clock.
        var receivedAt: Int64

        init(_ request: APNsSimulatorRequest) {
            connection = request.connectionID
            stream = request.streamID
            method = request.method
            path = request.path
            deviceToken = request.deviceToken
            headers = request.headers.map { [$0.name, $0.value] }
            keyID = request.keyID
            issuer = request.issuer
            issuedAt = request.issuedAt
            certificateTopic = request.certificateTopic
            payload = String(decoding: request.payload, as: UTF8.self)
            apnsID = request.apnsID
            status = request.status
            reason = request.reason?.rawValue
            receivedAt = Int64((request.receivedAt.timeIntervalSince1970 * 1000).rounded())
        }
    }

    private let file: NIOLockedValueBox<FileHandle>

    /// Opens `path` for appending, creating it when missing.
    init(path: String) throws {
        if !FileManager.default.fileExists(atPath: path) {
            try Data().write(to: URL(fileURLWithPath: path))
        }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seekToEnd()
        self.file = NIOLockedValueBox(handle)
    }

    /// Appends one line per request. Errors are dropped: the log must not break the simulator.
    func append(_ requests: [APNsSimulatorRequest]) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .withoutEscapingSlashes
        var data = Data()
        for request in requests {
            guard let line = try? encoder.encode(Line(request)) else { continue }
            data.append(line)
            data.append(UInt8(ascii: "\n"))
        }
        file.withLockedValue { try? $0.write(contentsOf: data) }
    }

    /// Closes the file.
    func close() throws {
        try file.withLockedValue { try $0.close() }
    }
}
