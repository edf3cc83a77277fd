import ArgumentParser
import Dispatch
import FCMSimulator
import Foundation
import NIOCore
import NIOPosix

/// `pushrelay fcm-sim`: runs the FCM HTTP v1 simulator (and its token endpoint) until SIGINT or SIGTERM, then prints
/// its statistics.
struct FCMSimCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fcm-sim",
        abstract: "Run a local FCM HTTP v1 simulator (HTTP/2 over TLS, with Google's token endpoint) and its faults."
    )

    @Option(help: "Address to bind.")
    var host = "127.0.0.1"

    @Option(help: "TCP port (0 picks a free one).")
    var port = 8444

    @Option(name: .customLong("cert-dir"), help: "Folder of the simulator's CA (ca.pem is what clients trust).")
    var certificateDirectory = ".pushrelay/fcm-sim"

    @Option(name: .customLong("account"), help: "A service-account JSON file to accept (repeatable).")
    var accounts: [String] = []

    @Option(
        name: .customLong("new-account"),
        help: "PROJECT:FILE: write a new service account of PROJECT, pointing at this simulator (repeatable).")
    var newAccounts: [String] = []

    @Option(
        name: .customLong("unregistered"), help: "Answer 404 UNREGISTERED for this registration token (repeatable).")
    var unregistered: [String] = []

    @Option(
        name: .customLong("invalid-token"),
        help: "Answer 400 INVALID_ARGUMENT (not a valid registration token) for this token (repeatable).")
    var invalidTokens: [String] = []

    @Option(name: .customLong("sender-id-mismatch"), help: "Answer 403 SENDER_ID_MISMATCH for this token (repeatable).")
    var senderIDMismatchTokens: [String] = []

    @Option(
        name: .customLong("third-party-auth-error"),
        help: "Answer 401 THIRD_PARTY_AUTH_ERROR for this token (repeatable).")
    var thirdPartyAuthErrorTokens: [String] = []

    @Option(name: .customLong("messages-per-minute"), help: "Each project's quota; beyond it 429 QUOTA_EXCEEDED.")
    var messagesPerMinute = 600_000

    @Option(name: .customLong("rate-429"), help: "Probability (0-1) of 429 QUOTA_EXCEEDED.")
    var rate429 = 0.0

    @Option(name: .customLong("rate-500"), help: "Probability (0-1) of 500 INTERNAL.")
    var rate500 = 0.0

    @Option(name: .customLong("rate-503"), help: "Probability (0-1) of 503 UNAVAILABLE.")
    var rate503 = 0.0

    @Option(name: .customLong("goaway-after"), help: "Send GOAWAY after N requests on a connection.")
    var goawayAfter: Int?

    @Option(name: .customLong("drop-after"), help: "Close the TCP connection abruptly after N requests.")
    var dropAfter: Int?

    @Option(name: .customLong("latency-ms"), help: "Delay every answer by this many milliseconds.")
    var latencyMilliseconds: Int64 = 0

    @Option(
        name: .customLong("latency-jitter-ms"),
        help: "Delay every answer by up to this many milliseconds more, drawn for each answer.")
    var latencyJitterMilliseconds: Int64 = 0

    @Option(name: .customLong("max-streams"), help: "SETTINGS_MAX_CONCURRENT_STREAMS of each connection.")
    var maxStreams = 100

    @Option(name: .customLong("token-lifetime"), help: "Seconds an access token is valid.")
    var tokenLifetime = 3_599

    @Option(help: "Seed of the random faults (default: random).")
    var seed: UInt64?

    @Option(help: "Event loop threads.")
    var threads = 1

    /// Refuses values the simulator cannot use, before anything starts.
    func validate() throws {
        for (name, rate) in [("--rate-429", rate429), ("--rate-500", rate500), ("--rate-503", rate503)]
        where !(0...1).contains(rate) {
            throw ValidationError("\(name) must be between 0 and 1")
        }
        if rate429 + rate500 + rate503 > 1 { throw ValidationError("the --rate-* options add up to more than 1") }
        if threads < 1 { throw ValidationError("--threads must be at least 1") }
        if !(0...65535).contains(port) { throw ValidationError("--port must be between 0 and 65535") }
        if latencyMilliseconds < 0 { throw ValidationError("--latency-ms must not be negative") }
        if latencyJitterMilliseconds < 0 { throw ValidationError("--latency-jitter-ms must not be negative") }
        if messagesPerMinute < 1 { throw ValidationError("--messages-per-minute must be at least 1") }
        if maxStreams < 1 { throw ValidationError("--max-streams must be at least 1") }
        if tokenLifetime < 1 { throw ValidationError("--token-lifetime must be at least 1") }
        for (name, value) in [("--goaway-after", goawayAfter), ("--drop-after", dropAfter)] {
            if let value, value < 1 { throw ValidationError("\(name) must be at least 1") }
        }
        for entry in newAccounts where Self.projectAndFile(entry) == nil {
            throw ValidationError("--new-account takes PROJECT:FILE, not '\(entry)'")
        }
    }

    /// Starts the simulator, writes the new accounts' files, and serves until a signal.
    func run() async throws {
        var configuration = FCMSimulatorConfiguration(certificateDirectory: certificateDirectory)
        // Nothing reads a separate process's recorded messages: it prints its statistics.
        configuration.recordMessages = false
        configuration.host = host
        configuration.port = port
        configuration.accessTokenLifetime = tokenLifetime
        configuration.seed = seed
        configuration.accounts = try accounts.map(Self.loadAccount)
        configuration.faults.unregisteredTokens = Set(unregistered)
        configuration.faults.invalidTokens = Set(invalidTokens)
        configuration.faults.senderIDMismatchTokens = Set(senderIDMismatchTokens)
        configuration.faults.thirdPartyAuthErrorTokens = Set(thirdPartyAuthErrorTokens)
        configuration.faults.messagesPerMinute = messagesPerMinute
        configuration.faults.rate429 = rate429
        configuration.faults.rate500 = rate500
        configuration.faults.rate503 = rate503
        configuration.faults.goawayAfter = goawayAfter
        configuration.faults.dropConnectionAfter = dropAfter
        configuration.faults.latency = .milliseconds(latencyMilliseconds)
        configuration.faults.latencyJitter = .milliseconds(latencyJitterMilliseconds)
        configuration.faults.maxConcurrentStreams = maxStreams

        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        let simulator: FCMSimulator
        do {
            simulator = try await FCMSimulator.start(configuration: configuration, group: group)
            for entry in newAccounts {
                guard let (project, file) = Self.projectAndFile(entry) else { continue }
                let json = try simulator.makeServiceAccount(projectID: project)
                try json.write(to: URL(fileURLWithPath: file), options: .atomic)
                try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
                Self.say("service account of \(project) written to \(file)")
            }
        } catch {
            try await group.shutdownGracefully()
            throw error
        }
        Self.say("FCM simulator listening on https://\(simulator.host):\(simulator.port)")
        Self.say("token endpoint: \(simulator.tokenURI)")
        Self.say("CA certificate: \(simulator.caFile)")
        if accounts.isEmpty && newAccounts.isEmpty {
            Self.say("warning: no --account or --new-account given: every token request will be refused")
        }

        let signal = await Self.waitForTermination()
        Self.say("received signal \(signal), shutting down")
        try await simulator.shutdown()
        try await group.shutdownGracefully()
        Self.printStatistics(simulator.statistics())
    }

    /// `PROJECT:FILE` split at its first colon; nil when either part is empty.
    private static func projectAndFile(_ entry: String) -> (String, String)? {
        let parts = entry.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else { return nil }
        return (String(parts[0]), String(parts[1]))
    }

    /// The account of a service-account file.
    private static func loadAccount(_ path: String) throws -> FCMSimulatorAccount {
        let json: Data
        do {
            json = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw ValidationError("cannot read service-account file \(path): \(error.localizedDescription)")
        }
        do {
            return try FCMSimulatorAccount(serviceAccountJSON: json)
        } catch {
            throw ValidationError("\(path): \(error)")
        }
    }

    /// Suspends until SIGINT or SIGTERM arrives, and returns it.
    private static func waitForTermination() async -> Int32 {
        let (signals, continuation) = AsyncStream.makeStream(of: Int32.self)
        let sources = [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { continuation.yield(number) }
            source.resume()
            return source
        }
        defer { sources.forEach { $0.cancel() } }
        var iterator = signals.makeAsyncIterator()
        return await iterator.next() ?? SIGTERM
    }

    /// Writes a line to standard output at once (scripts wait for the listening address).
    private static func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    /// The statistics, one counter a line.
    private static func printStatistics(_ statistics: FCMSimulatorStatistics) {
        say("connections accepted: \(statistics.connectionsAccepted)")
        say("requests received: \(statistics.requestsReceived)")
        for (status, count) in statistics.responsesByStatus.sorted(by: { $0.key < $1.key }) {
            say("  status \(status): \(count)")
        }
        for (code, count) in statistics.responsesByErrorCode.sorted(by: { $0.key < $1.key }) {
            say("  \(code): \(count)")
        }
        say("access tokens issued: \(statistics.accessTokensIssuedInAll)")
        for (account, count) in statistics.accessTokensIssued.sorted(by: { $0.key < $1.key }) {
            say("  to \(account): \(count)")
        }
        for (project, count) in statistics.messagesSent.sorted(by: { $0.key < $1.key }) {
            say("messages sent for \(project): \(count)")
        }
        say("GOAWAYs sent: \(statistics.goawaysSent)")
        say("connections dropped: \(statistics.connectionsDropped)")
        say("streams over the announced limit: \(statistics.streamsOverLimit)")
    }
}
