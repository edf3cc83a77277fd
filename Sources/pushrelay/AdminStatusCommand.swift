import ArgumentParser
import Foundation
import RelayServer
import RelayStore

/// `pushrelay admin status`: every tenant's delivery health as the database knows it, whichever relay met it.
struct AdminStatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show each tenant's delivery health: keys, configuration faults and held notifications.",
        discussion: """
            One line per tenant and environment: whether it is enabled, its usable signing keys (and, with a \
            master key, whether it opens them), a configuration fault a relay met (APNs refusing the key or the \
            bundle id) with what to fix, and the notifications held for APNs with the oldest hold. A running \
            relay's own view, with its pools, is its operator port's /status. Exits 1 when any tenant has a \
            fault, no usable key, keys the master key does not open, or notifications held.
            """
    )

    @OptionGroup var masterKey: MasterKeyOptions

    @OptionGroup var database: DatabaseOptions

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let masterKey: MasterKey? =
            masterKey.masterKeyFile != nil || environment[MasterKey.environmentVariable] != nil
            ? try self.masterKey.load() : nil
        try await database.withStore(access: .reading) { store in
            let report = try await Self.report(store: store, masterKey: masterKey)
            for line in report.lines { print(line) }
            if report.troubled { throw ExitCode(1) }
        }
    }

    /// The status lines, and whether any tenant is in trouble.
    static func report(store: RelayStore, masterKey: MasterKey?) async throws -> (lines: [String], troubled: Bool) {
        let tenants = try await store.listTenants()
        guard !tenants.isEmpty else { return (["no tenants (pushrelay admin tenant sync Tenants/ adds them)"], false) }
        let faults = try await store.providerFaults()
        let held = try await store.heldDeliveries()
        let dates = ISO8601DateFormatter()
        var lines = ["TENANT        ENVIRONMENT  STATE     KEYS                   FAULT / HELD"]
        var troubled = false
        for tenant in tenants {
            let keys = try await store.listSigningKeys(tenant: tenant.id).filter { $0.status != .retired }
            var opens = "-"
            if let masterKey, !keys.isEmpty {
                do {
                    _ = try await store.loadSigningKeys(tenant: tenant.id, masterKey: masterKey)
                    opens = "opens"
                } catch {
                    opens = "does NOT open"
                    troubled = true
                }
            }
            let environments = Set(tenant.configuration.bundleIDs.values.flatMap(\.environments))
            for environment in environments.sorted(by: { $0.rawValue < $1.rawValue }) {
                let usable = keys.filter { $0.kind == .apnsP8 && $0.environment.covers(environment) }
                var keyText = usable.isEmpty ? "none" : usable.map(\.keyID).joined(separator: ",")
                if !usable.isEmpty && masterKey != nil { keyText += " (\(opens))" }
                var notes: [String] = []
                if let fault = faults.first(where: {
                    $0.tenantID == tenant.id && $0.environment == environment.rawValue
                }) {
                    notes.append("FAULT \(fault.reason) since \(dates.string(from: fault.since)): \(fault.detail)")
                }
                for row in held where row.tenantID == tenant.id && row.environment == environment.rawValue {
                    notes.append(
                        "HELD \(row.devices) (\(row.reason)) since \(dates.string(from: row.oldestSince)), "
                            + "next try \(dates.string(from: row.nextAttempt))")
                }
                if usable.isEmpty { notes.append("no signing key: its sends are refused unless a relay has one") }
                troubled = troubled || !notes.isEmpty
                lines.append(
                    [
                        tenant.id.padding(toLength: 13, withPad: " ", startingAt: 0),
                        environment.rawValue.padding(toLength: 12, withPad: " ", startingAt: 0),
                        (tenant.enabled ? "enabled" : "disabled").padding(toLength: 9, withPad: " ", startingAt: 0),
                        keyText.padding(toLength: 22, withPad: " ", startingAt: 0),
                        notes.isEmpty ? "ok" : notes.joined(separator: "; "),
                    ].joined(separator: " "))
            }
        }
        return (lines, troubled)
    }
}
