import ArgumentParser
import Foundation
import RelayStore

extension SigningKeyEnvironment: ExpressibleByArgument {}

/// Where the admin key commands find the master key.
struct MasterKeyOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "File holding the 32-byte master key (raw, base64 or hex); default: PUSHRELAY_MASTER_KEY (base64).",
            valueName: "file"))
    var masterKeyFile: String?

    /// The master key, or a ``Failure`` saying why there is none.
    func load() throws -> MasterKey {
        do {
            return try MasterKey.load(file: masterKeyFile)
        } catch {
            throw Failure(message: error.description)
        }
    }
}

/// The new key of `add` and `rotate`: an APNs `.p8` with its ids, or an FCM service account.
struct NewKeyOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Apple's .p8 file (PKCS#8 P-256 private key).", valueName: "file"))
    var p8: String?

    @Option(help: "Apple's 10-character key id (with --p8).")
    var keyID: String?

    @Option(help: "Apple's 10-character team id (with --p8).")
    var teamID: String?

    @Option(
        help: ArgumentHelp(
            "A Google service account's JSON file (FCM HTTP v1), instead of a .p8: its project must be the tenant "
                + "file's fcm.project_id; its private_key_id is the key id.", valueName: "file"))
    var fcmServiceAccount: String?

    /// Refuses a mix of the two kinds, or a `.p8` without its ids.
    func validate() throws {
        if fcmServiceAccount != nil {
            guard p8 == nil, keyID == nil, teamID == nil else {
                throw ValidationError(
                    "--fcm-service-account excludes --p8, --key-id and --team-id (the file names its key and project)")
            }
        } else if p8 == nil || keyID == nil || teamID == nil {
            throw ValidationError(
                "give --p8, --key-id and --team-id (an APNs key), or --fcm-service-account (an FCM service account)")
        }
    }

    /// The checked key: a `.p8`'s text and ids (the store checks them), or a service account checked by
    /// ``ServiceAccountFile`` (its project against the tenant's when stored).
    func newKey() throws -> NewKey {
        if let fcmServiceAccount { return .fcm(try ServiceAccountFile(path: fcmServiceAccount)) }
        // validate() made sure all three are there.
        let (p8, keyID, teamID) = (p8 ?? "", keyID ?? "", teamID ?? "")
        do {
            return .p8(pem: try String(contentsOfFile: p8, encoding: .utf8), keyID: keyID, teamID: teamID)
        } catch {
            throw Failure(message: "cannot read key file \(p8): \((error as NSError).localizedDescription)")
        }
    }
}

/// A new key read from the command line's files.
enum NewKey: Sendable {
    /// An APNs `.p8`'s text, key id and team id.
    case p8(pem: String, keyID: String, teamID: String)
    /// An FCM service account.
    case fcm(ServiceAccountFile)
}

/// Prints a key's metadata line.
private func printKey(_ key: SigningKeyRecord, verb: String) {
    switch key.kind {
    case .apnsP8:
        print(
            "\(verb) \(key.tenantID) key \(key.keyID) team \(key.teamID) \(key.environment.rawValue) "
                + "fingerprint \(key.fingerprint) (\(key.status.rawValue))")
    case .fcmServiceAccount:
        print(
            "\(verb) \(key.tenantID) FCM service account \(key.keyID) project \(key.teamID) "
                + "fingerprint \(key.fingerprint) (\(key.status.rawValue))")
    }
}

/// `pushrelay admin key ...`.
struct AdminKeyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "key",
        abstract: "Add, list, rotate, retire and remove a tenant's APNs signing keys and FCM service accounts.",
        discussion: """
            A key is an APNs .p8 (--p8, --key-id, --team-id) or a Google service account's JSON file for FCM \
            (--fcm-service-account: its project must be the one the tenant file's fcm.project_id names; its \
            private_key_id is its key id). Keys are stored sealed with AES-256-GCM under the master key (--master-key-file, else \
            PUSHRELAY_MASTER_KEY; pushrelay admin master-key generate makes one), bound to their tenant and key \
            id. The key itself is never stored in clear, printed or logged; list shows metadata and a fingerprint \
            (SHA-256 of the public key). Every change is announced with NOTIFY pushrelay_keys, '<tenant>' so a \
            running relay can reload that tenant's keys.
            """,
        subcommands: [Add.self, List.self, Rotate.self, Retire.self, Remove.self]
    )

    /// `pushrelay admin key add TENANT`.
    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check a .p8 key or an FCM service account (it must sign, and verify) and store it sealed.",
            discussion: "A key that is refused is not stored. The master key is required.")

        @Argument(help: "The tenant id.")
        var tenant: String

        @OptionGroup var key: NewKeyOptions

        @Option(help: "The APNs environments a .p8 is used for (default: both).")
        var environment: SigningKeyEnvironment?

        @OptionGroup var masterKey: MasterKeyOptions

        @OptionGroup var database: DatabaseOptions

        /// Refuses an environment for a service account: FCM has none.
        func validate() throws {
            if key.fcmServiceAccount != nil, environment != nil {
                throw ValidationError("--environment is an APNs key's; an FCM service account has none")
            }
        }

        func run() async throws {
            let masterKey = try self.masterKey.load()
            let newKey = try key.newKey()
            let (tenant, environment) = (self.tenant, self.environment ?? .both)
            try await database.withStore { store in
                switch newKey {
                case .p8(let pem, let keyID, let teamID):
                    let record = try await store.addSigningKey(
                        tenant: tenant, p8PEM: pem, keyID: keyID, teamID: teamID, environment: environment,
                        masterKey: masterKey)
                    printKey(record, verb: "added")
                case .fcm(let account):
                    let record = try await store.addSigningKey(
                        tenant: tenant, credential: account.credential(for: tenant, in: store), masterKey: masterKey)
                    printKey(record, verb: "added")
                    print("client email \(account.clientEmail)")
                }
            }
        }
    }

    /// `pushrelay admin key list TENANT`.
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "List a tenant's signing keys: kind, key id, team id (project), environment, fingerprint, status, dates."
        )

        @Argument(help: "The tenant id.")
        var tenant: String

        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let tenant = self.tenant
            try await database.withStore(access: .reading) { store in
                let keys = try await store.listSigningKeys(tenant: tenant)
                if keys.isEmpty {
                    print("no signing keys for \(tenant) (pushrelay admin key add \(tenant) --p8 ... adds one)")
                    return
                }
                let dates = ISO8601DateFormatter()
                // Service accounts' ids are longer than Apple's 10 characters: the columns widen to the longest.
                let idWidth = keys.map(\.keyID.count).max().map { max($0, 10) } ?? 10
                let teamWidth = keys.map(\.teamID.count).max().map { max($0, 12) } ?? 12
                func column(_ text: String, _ width: Int) -> String {
                    text.padding(toLength: width, withPad: " ", startingAt: 0) + "  "
                }
                print(
                    column("KIND", 19) + column("KEY ID", idWidth) + column("TEAM/PROJECT", teamWidth)
                        + "ENVIRONMENT  FINGERPRINT                       STATUS    CREATED")
                for key in keys {
                    var line =
                        column(key.kind.rawValue, 19) + column(key.keyID, idWidth) + column(key.teamID, teamWidth)
                        + key.environment.rawValue.padding(toLength: 11, withPad: " ", startingAt: 0) + "  "
                        + key.fingerprint + "  " + key.status.rawValue.padding(toLength: 8, withPad: " ", startingAt: 0)
                        + "  " + dates.string(from: key.createdAt)
                    if let retiringAt = key.retiringAt { line += "  retiring since \(dates.string(from: retiringAt))" }
                    if let retiredAt = key.retiredAt { line += "  retired \(dates.string(from: retiredAt))" }
                    print(line)
                }
            }
        }
    }

    /// `pushrelay admin key rotate TENANT`.
    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add a new key and mark the old one retiring, in one step.",
            discussion: """
                The new key is checked and stored as with add and becomes active; the old key becomes retiring: \
                work already in flight may still use it. Retire it with pushrelay admin key retire once that \
                work is done, or remove it.
                """)

        @Argument(help: "The tenant id.")
        var tenant: String

        @Option(help: "The key id of the key being replaced.")
        var oldKeyID: String

        @OptionGroup var key: NewKeyOptions

        @Option(help: "The new .p8's APNs environments (production, development or both); default: the old key's.")
        var environment: SigningKeyEnvironment?

        @OptionGroup var masterKey: MasterKeyOptions

        @OptionGroup var database: DatabaseOptions

        /// Refuses an environment for a service account: FCM has none.
        func validate() throws {
            if key.fcmServiceAccount != nil, environment != nil {
                throw ValidationError("--environment is an APNs key's; an FCM service account has none")
            }
        }

        func run() async throws {
            let masterKey = try self.masterKey.load()
            let newKey = try key.newKey()
            let (tenant, oldKeyID, environment) = (self.tenant, self.oldKeyID, self.environment)
            try await database.withStore { store in
                let record: SigningKeyRecord
                switch newKey {
                case .p8(let pem, let keyID, let teamID):
                    record = try await store.rotateSigningKey(
                        tenant: tenant, oldKeyID: oldKeyID, p8PEM: pem, keyID: keyID, teamID: teamID,
                        environment: environment, masterKey: masterKey)
                case .fcm(let account):
                    record = try await store.rotateSigningKey(
                        tenant: tenant, oldKeyID: oldKeyID, credential: account.credential(for: tenant, in: store),
                        masterKey: masterKey)
                }
                printKey(record, verb: "added")
                print("\(oldKeyID) is retiring (pushrelay admin key retire \(tenant) --key-id \(oldKeyID) retires it)")
            }
        }
    }

    /// `pushrelay admin key retire TENANT --key-id ID`.
    struct Retire: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop using a key (kept, marked retired, until removed).")

        @Argument(help: "The tenant id.")
        var tenant: String

        @Option(help: "The key id.")
        var keyID: String

        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let (tenant, keyID) = (self.tenant, self.keyID)
            try await database.withStore { store in
                try await store.retireSigningKey(tenant: tenant, keyID: keyID)
                print("retired \(tenant) key \(keyID)")
            }
        }
    }

    /// `pushrelay admin key remove TENANT --key-id ID`.
    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete a key, sealed bytes and all.")

        @Argument(help: "The tenant id.")
        var tenant: String

        @Option(help: "The key id.")
        var keyID: String

        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let (tenant, keyID) = (self.tenant, self.keyID)
            try await database.withStore { store in
                try await store.removeSigningKey(tenant: tenant, keyID: keyID)
                print("removed \(tenant) key \(keyID)")
            }
        }
    }
}

/// `pushrelay admin credential ...`.
struct AdminCredentialCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "credential",
        abstract: "Issue, list and revoke the secrets a tenant's backends authenticate with.",
        discussion: """
            A credential belongs to exactly one tenant. Its secret is printed once, at issue; the database keeps \
            only a random salt and SHA-256(salt || secret), compared in constant time.
            """,
        subcommands: [Issue.self, List.self, Revoke.self]
    )

    /// `pushrelay admin credential issue TENANT`.
    struct Issue: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Issue a new credential and print its secret, once.")

        @Argument(help: "The tenant id.")
        var tenant: String

        @Option(help: "A name for the credential, e.g. the backend that will hold it.")
        var name = "backend"

        @Flag(help: "Print only the secret, on one line: for scripts (`secret=$(pushrelay admin credential issue …)`).")
        var secretOnly = false

        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let (tenant, name, secretOnly) = (self.tenant, self.name, self.secretOnly)
            try await database.withStore { store in
                let credential = try await store.issueCredential(tenant: tenant, name: name)
                if secretOnly {
                    print(credential.secret)
                    return
                }
                print("issued credential \(credential.id) (\(credential.name)) for \(tenant)")
                print("secret: \(credential.secret)")
                print("Store it now: it is not saved and will not be shown again.")
            }
        }
    }

    /// `pushrelay admin credential list TENANT`.
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List a tenant's credentials: id, name, secret prefix, dates (never the secret).")

        @Argument(help: "The tenant id.")
        var tenant: String

        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let tenant = self.tenant
            try await database.withStore(access: .reading) { store in
                let credentials = try await store.listCredentials(tenant: tenant)
                if credentials.isEmpty {
                    print("no credentials for \(tenant) (pushrelay admin credential issue \(tenant) issues one)")
                    return
                }
                let dates = ISO8601DateFormatter()
                print("ID                                    PREFIX        CREATED               STATE    NAME")
                for credential in credentials {
                    let state = credential.revokedAt.map { "revoked \(dates.string(from: $0))" } ?? "valid"
                    print(
                        "\(credential.id)  \(credential.prefix)…  \(dates.string(from: credential.createdAt))  "
                            + "\(state)  \(credential.name)")
                }
            }
        }
    }

    /// `pushrelay admin credential revoke TENANT ID`.
    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke a credential: its secret stops working at once.")

        @Argument(help: "The tenant id.")
        var tenant: String

        @Argument(help: "The credential id (from credential list).")
        var id: String

        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let (tenant, id) = (self.tenant, self.id)
            try await database.withStore { store in
                try await store.revokeCredential(tenant: tenant, id: id)
                print("revoked credential \(id) of \(tenant)")
            }
        }
    }
}

/// `pushrelay admin master-key ...`.
struct AdminMasterKeyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "master-key",
        abstract: "Make the master key that seals stored signing keys.",
        subcommands: [Generate.self]
    )

    /// `pushrelay admin master-key generate`.
    struct Generate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a fresh random master key (base64 of 32 bytes).",
            discussion: """
                Put it in a file readable only by the relay's user (pushrelay admin master-key generate > \
                master.key; chmod 600 master.key) and pass --master-key-file, or export it as \
                PUSHRELAY_MASTER_KEY. Keep a copy: without it, stored signing keys cannot be opened.
                """)

        func run() async throws {
            print(MasterKey.generate().base64)
        }
    }
}
