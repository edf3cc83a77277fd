import ArgumentParser

/// The `pushrelay` command: the relay, its tools, and the APNs simulator.
@main
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
