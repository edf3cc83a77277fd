import ArgumentParser
import NIOCore
import NIOPosix

/// The program's entry: `pushrelay serve` runs its tasks on NIO's singleton event loops, then the command runs.
///
/// With Swift's own pool for the tasks, every APNs answer and every database reply woke a page's task on
/// another thread than the event loop that got it: a 10,000-device fan-out spent an eighth of the relay's CPU in
/// switching threads, and went 45.5 % → 51.4 % of the engine alone (four interleaved bench runs each) with
/// the tasks on the event loops. The other commands keep Swift's pool: the load test's and the engine's
/// figures are measured as before.
@main
enum PushRelayMain {
    static func main() async {
        // Installed before anything runs on Swift's pool, on the main thread as NIO asks.
        if CommandLine.arguments.dropFirst().first == "serve" {
            NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
        }
        await PushRelayCommand.main()
    }
}

/// The `pushrelay` command: the relay, its tools, and the APNs simulator.
struct PushRelayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushrelay",
        abstract: "A shared relay for iOS push notifications.",
        subcommands: [
            ServeCommand.self, SendCommand.self, AdminCommand.self, APNsCommand.self, APNsSimCommand.self,
            DemoCommand.self, LoadTestCommand.self,
        ]
    )
}

/// `pushrelay apns ...`: direct access to the APNs engine.
struct APNsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns",
        abstract: "Talk to APNs directly through the engine (no relay, no database).",
        subcommands: [APNsPushCommand.self]
    )
}
