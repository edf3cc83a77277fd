import ArgumentParser
import Foundation
import PushRelayClient
import PushRelayProtocol

/// `pushrelay send`: one notification through a running relay, over the wire protocol. For operators and
/// cron jobs (anky's 05:30 UTC prompt is `30 5 * * * pushrelay send --tenant anky --type daily_prompt ...`).
struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send a notification through a running relay (a client of the wire protocol).",
        discussion: """
            Name the audience with --user (repeatable), --token (repeatable) or --topic, and the tenant's \
            notification type with --type. The credential comes from --credential or PUSHRELAY_CREDENTIAL. \
            Without --wait it prints the job id once the relay has committed the job; with --wait it prints \
            every device's APNs outcome. Exit status 1 when the relay refuses the send, or with --wait when \
            no device got it.

            Example: pushrelay send --tenant circl --type message --user 42 --value circle_id=7 \
            --value channel_id=3 --title "Ada" --body "See you at 8" --wait
            """
    )

    @Option(help: "The relay's host:port.")
    var relay = "127.0.0.1:7411"
    @Option(help: "The tenant to send for.")
    var tenant: String
    @Option(help: "The tenant's credential secret (default: PUSHRELAY_CREDENTIAL).")
    var credential: String?
    @Option(name: .customLong("type"), help: "The notification type from the tenant's file.")
    var notificationType: String
    @Option(name: .customLong("user"), help: "A user id to send to (repeatable).")
    var users: [String] = []
    @Option(name: .customLong("token"), help: "A registered device token to send to (repeatable).")
    var tokens: [String] = []
    @Option(help: "A subscription topic to send to.")
    var topic: String?
    @Option(name: .customLong("exclude"), help: "A user id to leave out (repeatable).")
    var excluded: [String] = []
    @Option(help: "Alert title.")
    var title: String?
    @Option(help: "Alert subtitle.")
    var subtitle: String?
    @Option(help: "Alert body.")
    var body: String?
    @Option(help: "Badge number.")
    var badge: UInt32?
    @Option(help: "Sound name.")
    var sound: String?
    @Option(help: "thread-id (overrides the type's template).")
    var threadID: String?
    @Option(help: "Category (overrides the type's template).")
    var category: String?
    @Flag(help: "Set content-available (a background refresh).")
    var contentAvailable = false
    @Flag(help: "Set mutable-content.")
    var mutableContent = false
    @Option(help: "passive, active, time-sensitive or critical.")
    var interruptionLevel: String?
    @Option(help: "A JSON object of custom keys beside aps.")
    var customJSON: String?
    @Option(name: .customLong("value"), help: "name=value for the type's templates (repeatable).")
    var values: [String] = []
    @Option(help: "apns-collapse-id.")
    var collapseID: String?
    @Option(help: "Idempotency key: a repeat within 24 hours returns the first job and sends nothing.")
    var idempotencyKey: String?
    @Flag(help: "Wait for every device's APNs outcome.")
    var wait = false

    func run() async throws {
        let address: HostAndPort
        do {
            address = try HostAndPort(parsing: relay)
        } catch {
            throw Failure(message: "--relay must be host:port, not \(relay): \(error.reason)")
        }
        guard let credential = credential ?? ProcessInfo.processInfo.environment["PUSHRELAY_CREDENTIAL"] else {
            throw Failure(message: "give --credential or set PUSHRELAY_CREDENTIAL")
        }
        let client = PushRelayClient(
            configuration: .init(
                host: address.host, port: address.port, tenant: tenant, credential: credential,
                clientName: "pushrelay-send", reconnect: false
            )
        )
        let result: Pushrelay_V1_SendResult
        do {
            result = try await client.send(try request())
        } catch {
            await client.close()
            throw Failure(message: "\(error)")
        }
        await client.close()
        print("job \(result.jobID)\(result.duplicate ? " (duplicate of an earlier send; nothing sent)" : "")")
        guard wait else { return }
        for outcome in result.outcomes {
            let who = outcome.token.isEmpty ? "user \(outcome.userID)" : "\(outcome.userID) \(outcome.token.prefix(8))…"
            print("  \(who): \(outcome.outcome)\(outcome.reason.isEmpty ? "" : " \(outcome.reason)")")
        }
        print(
            "devices \(result.job.devices), delivered \(result.job.delivered), failed \(result.job.failed), "
                + "skipped \(result.job.skipped)"
        )
        if !result.duplicate, result.job.delivered == 0 { throw ExitCode.failure }
    }

    private func request() throws -> Pushrelay_V1_Send {
        var request = Pushrelay_V1_Send()
        request.notificationType = notificationType
        request.userIds = users
        request.tokens = tokens.map { token in
            var target = Pushrelay_V1_TokenTarget()
            target.token = token
            return target
        }
        request.topic = topic ?? ""
        request.excludeUserIds = excluded
        if title != nil || subtitle != nil || body != nil {
            var alert = Pushrelay_V1_Alert()
            alert.title = title ?? ""
            alert.subtitle = subtitle ?? ""
            alert.body = body ?? ""
            request.alert = alert
        }
        if let badge { request.badge = badge }
        request.sound = sound ?? ""
        request.threadID = threadID ?? ""
        request.category = category ?? ""
        request.contentAvailable = contentAvailable
        request.mutableContent = mutableContent
        request.interruptionLevel = interruptionLevel ?? ""
        request.customJson = customJSON ?? ""
        for pair in values {
            guard let equals = pair.firstIndex(of: "=") else {
                throw Failure(message: "--value takes name=value, not \(pair)")
            }
            request.templateValues[String(pair[..<equals])] = String(pair[pair.index(after: equals)...])
        }
        request.collapseID = collapseID ?? ""
        request.idempotencyKey = idempotencyKey ?? ""
        request.wait = wait
        return request
    }
}
