import ArgumentParser
import NIOCore
import NIOPosix
import RelayServer

/// The program's entry: `pushrelay serve` runs its tasks on NIO's singleton event loops, then the command runs.
///
/// With Swift's own pool for the tasks, every APNs answer and every database reply would wake a page's task on
/// another thread than the event loop that got it, and a fan-out would spend much of its CPU switching threads.
/// The other commands keep Swift's pool.
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
        version: RelayVersion.current,
        subcommands: [
            ServeCommand.self, SendCommand.self, AdminCommand.self, APNsCommand.self, APNsSimCommand.self,
            FCMCommand.self, FCMSimCommand.self,
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

/// `pushrelay fcm ...`: direct access to the FCM engine.
struct FCMCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fcm",
        abstract: "Talk to FCM HTTP v1 directly through the engine (no relay, no database).",
        subcommands: [FCMPushCommand.self]
    )
}
