import ArgumentParser

/// `pushrelay demo`: placeholder until the simulator lands.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "demo", abstract: "Run the main job on embedded defaults.")
}
