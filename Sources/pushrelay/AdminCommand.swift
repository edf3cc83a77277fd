import ArgumentParser
import EmbeddedPostgres
import Foundation
import Logging
import RelayStore

/// `pushrelay admin ...`: the relay's database and tenants.
struct AdminCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admin",
        abstract: "Manage the relay's database and tenants.",
        discussion: """
            The database is --database-url, else PUSHRELAY_DATABASE_URL, else an embedded PostgreSQL cluster in \
            --data-dir, started for the command (or reused when already running) and stopped afterwards if the \
            command started it. Only `admin migrate` creates that cluster and applies migrations (the commands \
            that change something do too when given --create); every other command refuses a missing cluster \
            or a schema that is behind, and the ones that only read never write.
            """,
        subcommands: [
            AdminMigrateCommand.self, AdminTenantCommand.self, AdminKeyCommand.self, AdminCredentialCommand.self,
            AdminMasterKeyCommand.self, AdminStatusCommand.self,
        ]
    )
}

/// An operator-facing failure: printed as `Error: <message>`, exit status 1.
struct Failure: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// `pushrelay admin migrate`.
struct AdminMigrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Apply pending schema migrations (safe to run from several processes at once).",
        discussion: "Creates the embedded cluster in --data-dir when there is none (with no database URL)."
    )

    @OptionGroup var database: DatabaseOptions

    func run() async throws {
        try await database.withStore(access: .create) { store in
            let applied = try await store.appliedMigrations()
            print("schema at version \(applied.last ?? 0) (\(applied.count) migrations applied)")
        }
    }
}

/// `pushrelay admin tenant ...`.
struct AdminTenantCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tenant",
        abstract: "Apply tenant files and inspect, enable or disable tenants.",
        subcommands: [Sync.self, List.self, Show.self, Disable.self, Enable.self]
    )

    /// `pushrelay admin tenant sync FOLDER`.
    struct Sync: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Apply every tenant file (*.yaml) in a folder, all or nothing.",
            discussion: """
                Prints one line per tenant: created, updated or unchanged, and "not in folder: ID" for stored \
                tenants without a file (they are kept). A bad file is reported as FILE:LINE: KEY: problem, \
                and nothing is applied. The format is documented in Tenants/README.md.
                """
        )

        @Argument(help: "The folder of tenant files, e.g. Tenants/.")
        var folder: String

        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let configurations: [TenantConfiguration]
            do {
                configurations = try TenantConfiguration.loadFolder(folder)
            } catch {
                throw Failure(message: error.description)
            }
            try await database.withStore { store in
                let report = try await store.syncTenants(configurations)
                for id in report.created { print("created \(id)") }
                for id in report.updated { print("updated \(id)") }
                for id in report.unchanged { print("unchanged \(id)") }
                for id in report.notInFolder { print("not in folder: \(id)") }
            }
        }
    }

    /// `pushrelay admin tenant list`.
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the stored tenants.")

        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            try await database.withStore(access: .reading) { store in
                let tenants = try await store.listTenants()
                if tenants.isEmpty {
                    print("no tenants (pushrelay admin tenant sync Tenants/ adds them)")
                    return
                }
                let width = max(2, tenants.map(\.id.count).max() ?? 0)
                print("ID".padding(toLength: width, withPad: " ", startingAt: 0) + "  STATE     TYPES  NAME")
                for tenant in tenants {
                    let state = tenant.enabled ? "enabled " : "disabled"
                    let types = String(tenant.configuration.notificationTypes.count)
                    print(
                        tenant.id.padding(toLength: width, withPad: " ", startingAt: 0) + "  \(state)  "
                            + types.padding(toLength: 5, withPad: " ", startingAt: 0) + "  \(tenant.displayName)")
                }
            }
        }
    }

    /// `pushrelay admin tenant show ID`.
    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show one tenant: its state and its stored configuration (JSON).")

        @Argument(help: "The tenant id.")
        var id: String

        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let id = self.id
            try await database.withStore(access: .reading) { store in
                guard let tenant = try await store.tenant(id: id) else { throw RelayStoreError.unknownTenant(id) }
                let dates = ISO8601DateFormatter()
                print("id: \(tenant.id)")
                print("name: \(tenant.displayName)")
                print("state: \(tenant.enabled ? "enabled" : "disabled")")
                print("created: \(dates.string(from: tenant.createdAt))")
                print("updated: \(dates.string(from: tenant.updatedAt))")
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
                print(String(decoding: try encoder.encode(tenant.configuration), as: UTF8.self))
            }
        }
    }

    /// `pushrelay admin tenant disable ID`.
    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop serving a tenant (kept in the database; sync does not re-enable it).")

        @Argument(help: "The tenant id.")
        var id: String

        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let id = self.id
            try await database.withStore { store in
                try await store.setTenantEnabled(id: id, enabled: false)
                print("disabled \(id)")
            }
        }
    }

    /// `pushrelay admin tenant enable ID`.
    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Serve a disabled tenant again.")

        @Argument(help: "The tenant id.")
        var id: String

        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let id = self.id
            try await database.withStore { store in
                try await store.setTenantEnabled(id: id, enabled: true)
                print("enabled \(id)")
            }
        }
    }
}
