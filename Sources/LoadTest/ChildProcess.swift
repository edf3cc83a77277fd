import Foundation

/// A program the load test starts (the relay, the APNs simulator, the engine baseline), with its output in a
/// log file, stopped with SIGTERM (then SIGKILL) when the run ends.
final class ChildProcess: Sendable {
    /// The program's name in messages.
    let name: String
    /// Where its standard output and error go.
    let logFile: String
    private let process: Process

    /// Starts `executable` with `arguments`, writing its output to `logFile`.
    init(name: String, executable: String, arguments: [String], logFile: String) throws {
        _ = FileManager.default.createFile(atPath: logFile, contents: nil)
        guard let output = FileHandle(forWritingAtPath: logFile) else {
            throw LoadTestError("cannot write \(logFile)")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        self.name = name
        self.logFile = logFile
        self.process = process
    }

    /// The process id.
    var pid: Int32 { process.processIdentifier }

    /// Whether it still runs.
    var isRunning: Bool { process.isRunning }

    /// Its exit status once it has ended.
    var exitStatus: Int32? { process.isRunning ? nil : process.terminationStatus }

    /// Its output so far.
    func output() -> String {
        (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
    }

    /// The last `count` lines of its output, for error messages.
    func lastLines(_ count: Int = 15) -> String {
        output().split(separator: "\n").suffix(count).joined(separator: "\n")
    }

    /// Waits until `ready` finds what it looks for in the output (or a file), for at most `limit`.
    func waitFor<T>(_ what: String, limit: Duration = .seconds(120), ready: () -> T?) async throws -> T {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if let found = ready() { return found }
            guard process.isRunning else {
                throw LoadTestError(
                    "\(name) exited (status \(process.terminationStatus)) before \(what):\n\(lastLines())")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw LoadTestError("\(name) did not report \(what) within \(limit):\n\(lastLines())")
    }

    /// Waits for the program to end by itself, for at most `limit`; returns its exit status.
    func waitForExit(limit: Duration) async throws -> Int32 {
        let deadline = ContinuousClock.now + limit
        while process.isRunning {
            guard ContinuousClock.now < deadline else {
                stop(grace: .seconds(5))
                throw LoadTestError("\(name) did not finish within \(limit):\n\(lastLines())")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        return process.terminationStatus
    }

    /// SIGTERM, then SIGKILL after `grace`; returns once the process has ended.
    func stop(grace: Duration = .seconds(60)) {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGTERM)
        let deadline = ContinuousClock.now + grace
        while process.isRunning, ContinuousClock.now < deadline {
            usleep(20_000)
        }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}

/// A load test that could not run, with what went wrong.
package struct LoadTestError: Error, CustomStringConvertible, Sendable {
    /// What went wrong.
    package let description: String

    init(_ description: String) {
        self.description = description
    }
}
