import APNsSimulator
import ArgumentParser
import Dispatch
import Foundation
import NIOCore
import NIOPosix

/// `pushrelay apns-sim`: runs the APNs simulator until SIGINT or SIGTERM, then prints its statistics.
struct APNsSimCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-sim",
        abstract: "Run a local APNs simulator (HTTP/2 over TLS) with injectable faults."
    )

    @Option(help: "Address to bind.")
    var host = "127.0.0.1"

    @Option(help: "TCP port (0 picks a free one).")
    var port = 8443

    @Option(name: .customLong("cert-dir"), help: "Folder of the simulator's CA (ca.pem is what clients trust).")
    var certificateDirectory = ".pushrelay/apns-sim"

    @Option(
        name: .customLong("key"),
        help: "KEYID:TEAMID:PATH of an accepted token key: Apple's .p8, or a P-256 public key PEM (repeatable)."
    )
    var keys: [String] = []

    @Option(name: .customLong("topic"), help: "Allowed bundle id (repeatable; none allows any).")
    var topics: [String] = []

    @Option(name: .customLong("max-streams"), help: "MAX_CONCURRENT_STREAMS after a connection's first success.")
    var maxStreams = 1000

    @Option(
        name: .customLong("unregistered"),
        help: "TOKEN[:MS]: answer 410 Unregistered for TOKEN, with timestamp MS (default: now) (repeatable)."
    )
    var unregistered: [String] = []

    @Option(name: .customLong("rate-429"), help: "Probability (0-1) of 429 TooManyRequests.")
    var rate429 = 0.0

    @Option(name: .customLong("rate-500"), help: "Probability (0-1) of 500 InternalServerError.")
    var rate500 = 0.0

    @Option(name: .customLong("rate-503"), help: "Probability (0-1) of 503 ServiceUnavailable.")
    var rate503 = 0.0

    @Option(name: .customLong("goaway-after"), help: "Send GOAWAY after N requests on a connection.")
    var goawayAfter: Int?

    @Option(name: .customLong("refuse-stream-every"), help: "Reset every Nth stream with REFUSED_STREAM.")
    var refuseStreamEvery: Int?

    @Option(name: .customLong("drop-after"), help: "Close the TCP connection abruptly after N requests.")
    var dropAfter: Int?

    @Option(name: .customLong("stall-after"), help: "Stop answering anything (PINGs too) after N requests.")
    var stallAfter: Int?

    @Option(name: .customLong("latency-ms"), help: "Delay every response by this many milliseconds.")
    var latencyMilliseconds: Int64 = 0

    @Option(
        name: .customLong("latency-jitter-ms"),
        help: "Delay every response by up to this many milliseconds more, drawn for each response.")
    var latencyJitterMilliseconds: Int64 = 0

    @Option(help: "Seed of the random faults (default: random).")
    var seed: UInt64?

    @Flag(
        name: .customLong("strict-json"), inversion: .prefixedNo,
        help: "Parse each payload as JSON (off: only check that it looks like an object)."
    )
    var strictJSON = true

    @Option(name: .customLong("log-requests"), help: "Append one JSON line per request to this file.")
    var requestLog: String?

    @Option(help: "Event loop threads.")
    var threads = 1

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
        for (name, value) in [
            ("--goaway-after", goawayAfter), ("--refuse-stream-every", refuseStreamEvery), ("--drop-after", dropAfter),
            ("--stall-after", stallAfter),
        ] {
            if let value, value < 1 { throw ValidationError("\(name) must be at least 1") }
        }
    }

    func run() async throws {
        var configuration = APNsSimulatorConfiguration(certificateDirectory: certificateDirectory)
        configuration.host = host
        configuration.port = port
        configuration.keys = try keys.map(Self.loadKey)
        configuration.topics = topics
        configuration.maxConcurrentStreams = maxStreams
        configuration.seed = seed
        configuration.strictJSON = strictJSON
        configuration.requestLogPath = requestLog
        configuration.faults = try makeFaults()

        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        let simulator: APNsSimulator
        do {
            simulator = try await APNsSimulator.start(configuration: configuration, group: group)
        } catch {
            try await group.shutdownGracefully()
            throw error
        }
        Self.say("APNs simulator listening on https://\(simulator.host):\(simulator.port)")
        Self.say("CA certificate: \(simulator.caFile)")
        if configuration.keys.isEmpty { Self.say("warning: no --key given: every provider token will be refused") }

        let signal = await Self.waitForTermination()
        Self.say("received signal \(signal), shutting down")
        try await simulator.shutdown()
        try await group.shutdownGracefully()
        Self.printStatistics(simulator.statistics())
    }

    private func makeFaults() throws -> APNsSimulatorFaults {
        var faults = APNsSimulatorFaults()
        faults.scriptedTokens = true
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        for entry in unregistered {
            let parts = entry.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            let milliseconds = parts.count == 2 ? Int64(parts[1]) : now
            guard let milliseconds, !parts[0].isEmpty else {
                throw ValidationError("--unregistered takes TOKEN or TOKEN:MILLISECONDS, not '\(entry)'")
            }
            faults.unregisteredTokens[String(parts[0])] = milliseconds
        }
        faults.rate429 = rate429
        faults.rate500 = rate500
        faults.rate503 = rate503
        faults.goawayAfter = goawayAfter
        faults.refuseStreamEvery = refuseStreamEvery
        faults.dropConnectionAfter = dropAfter
        faults.stallAfter = stallAfter
        faults.latency = .milliseconds(latencyMilliseconds)
        faults.latencyJitter = .milliseconds(latencyJitterMilliseconds)
        return faults
    }

    /// Reads `KEYID:TEAMID:PATH`.
    private static func loadKey(_ argument: String) throws -> APNsSimulatorKey {
        let parts = argument.split(separator: ":", maxSplits: 2).map(String.init)
        guard parts.count == 3 else { throw ValidationError("--key takes KEYID:TEAMID:PATH, not '\(argument)'") }
        let pem: String
        do {
            pem = try String(contentsOfFile: parts[2], encoding: .utf8)
        } catch {
            throw ValidationError("cannot read key file \(parts[2]): \(error.localizedDescription)")
        }
        return try APNsSimulatorKey(keyID: parts[0], teamID: parts[1], pem: pem)
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

    /// Writes a line to standard output at once (`print` is buffered when the output is not a terminal,
    /// and scripts wait for the listening address).
    private static func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    private static func printStatistics(_ statistics: APNsSimulatorStatistics) {
        say("connections accepted: \(statistics.connectionsAccepted)")
        say("requests received: \(statistics.requestsReceived)")
        for (status, count) in statistics.responsesByStatus.sorted(by: { $0.key < $1.key }) {
            say("  status \(status): \(count)")
        }
        for (reason, count) in statistics.responsesByReason.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            say("  \(reason): \(count)")
        }
        say("invalid JSON payloads: \(statistics.invalidJSONPayloads)")
        let tokens = statistics.tokensByConnection.values.reduce(0) { $0 + $1.count }
        say("provider tokens seen: \(tokens) on \(statistics.tokensByConnection.count) connections")
        say("GOAWAYs sent: \(statistics.goawaysSent)")
        say("streams refused: \(statistics.streamsRefused)")
        say("streams over the announced limit: \(statistics.streamsOverLimit)")
        say("connections dropped: \(statistics.connectionsDropped)")
        say("connections stalled: \(statistics.connectionsStalled)")
    }
}
