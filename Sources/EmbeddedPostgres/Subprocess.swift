import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Runs one program to completion and collects what it printed.
///
/// Uses `posix_spawn` rather than Foundation's `Process`: `Process` learns of a child's exit
/// through a descriptor the child inherits, which a daemon forked by the child (`pg_ctl start`
/// forks the server) keeps open forever. Here the child gets only stdin, stdout and stderr, and a
/// dedicated thread waits for it, so no task or event loop blocks.
struct Subprocess {
    /// The program's exit status and its standard output and error, interleaved.
    struct Result {
        var status: Int32
        var output: String
    }

    /// Runs `executable` with `arguments`, as `user` (through `runuser`) when one is given.
    ///
    /// Output goes to a temporary file rather than a pipe, so a server forked by the program
    /// cannot hold the reading end open.
    static func run(
        _ executable: String,
        _ arguments: [String],
        as user: String? = nil
    ) async throws(EmbeddedPostgresError) -> Result {
        var argv = [executable] + arguments
        var program = executable
        if let user {
            program = try runuserPath()
            argv = [program, "-u", user, "--"] + argv
        }
        var environment = ProcessInfo.processInfo.environment
        environment["LC_ALL"] = "C"
        environment["LANG"] = "C"
        let envp = environment.map { "\($0.key)=\($0.value)" }

        let outputPath = NSTemporaryDirectory() + "pushrelay-subprocess-\(UUID().uuidString).log"
        let outputFD = open(outputPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard outputFD >= 0 else {
            throw .commandFailed(command: executable, reason: "cannot create \(outputPath): \(errnoText())")
        }
        defer { unlink(outputPath) }

        let pid: pid_t
        do {
            defer { close(outputFD) }
            pid = try spawn(program, argv: argv, envp: envp, outputFD: outputFD)
        }
        let status = await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            Thread.detachNewThread {
                continuation.resume(returning: waitForExit(pid))
            }
        }
        let data = FileManager.default.contents(atPath: outputPath) ?? Data()
        let output = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return Result(status: status, output: output)
    }

    private static func spawn(
        _ program: String,
        argv: [String],
        envp: [String],
        outputFD: Int32
    ) throws(EmbeddedPostgresError) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, outputFD, 1)
        posix_spawn_file_actions_adddup2(&actions, outputFD, 2)
        // Nothing else of ours reaches the child (or the server it may fork), and the child starts
        // in "/" since the unprivileged user may not be able to enter our working directory. glibc
        // (2.34+) has both actions but its Swift module does not export them: look them up.
        if let addCloseFrom = Self.addCloseFrom {
            _ = addCloseFrom(&actions, 3)
        }
        if let addChdir = Self.addChdir {
            _ = addChdir(&actions, "/")
        }

        let cArgv = argv.map { strdup($0) } + [nil]
        let cEnvp = envp.map { strdup($0) } + [nil]
        defer {
            cArgv.forEach { free($0) }
            cEnvp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, program, &actions, nil, cArgv, cEnvp)
        guard result == 0 else {
            throw .commandFailed(command: program, reason: String(cString: strerror(result)))
        }
        return pid
    }

    private typealias AddCloseFrom =
        @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private typealias AddChdir =
        @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32

    private static let addCloseFrom: AddCloseFrom? = symbol("posix_spawn_file_actions_addclosefrom_np")
    private static let addChdir: AddChdir? = symbol("posix_spawn_file_actions_addchdir_np")

    private static func symbol<Function>(_ name: String) -> Function? {
        guard let handle = dlopen(nil, RTLD_NOW), let address = dlsym(handle, name) else { return nil }
        return unsafeBitCast(address, to: Function.self)
    }

    /// Blocks the calling thread until `pid` exits; returns its exit status (128 + signal if killed).
    private static func waitForExit(_ pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { return -1 }
        }
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    private static func errnoText() -> String {
        String(cString: strerror(errno))
    }

    /// Where util-linux's `runuser` lives.
    static func runuserPath() throws(EmbeddedPostgresError) -> String {
        for candidate in ["/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser", "/bin/runuser"]
        where FileManager.default.isExecutableFile(atPath: candidate) {
            return candidate
        }
        throw .commandFailed(command: "runuser", reason: "not found; install util-linux")
    }
}
