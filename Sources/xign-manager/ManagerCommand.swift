import ArgumentParser
import Foundation
import Hummingbird
import Logging
import XignDevice
import XignManager
import XignManagerConfiguration
import XignProtocol

@main
struct ManagerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "xign-manager",
        abstract: "The xign identity manager: registration, personalization and the lockout, over HTTP.",
        version: XignManagerVersion.string,
        subcommands: [Serve.self, Admin.self]
    )
}

/// Where the manager's config comes from: a file, a data directory for everything, or both.
struct ConfigOptions: ParsableArguments {
    @Option(help: "Config file (default: /etc/xign-manager/manager.conf when it exists).")
    var config: String?

    @Option(help: "Keep the database, keys and outbox in this directory instead of the paths in the config.")
    var dataDir: String?

    /// Every command reads its configuration first, before any thread and before the TPM pepper may be opened.
    func load() throws -> ManagerConfiguration {
        TPMLog.quiet()
        var configuration: ManagerConfiguration
        do {
            if let config {
                configuration = try ManagerConfiguration.load(path: config)
            } else if FileManager.default.fileExists(atPath: "/etc/xign-manager/manager.conf") && dataDir == nil {
                configuration = try ManagerConfiguration.load(path: "/etc/xign-manager/manager.conf")
            } else {
                configuration = ManagerConfiguration()
            }
        } catch {
            throw ValidationError("\(error)")
        }
        if let dataDir {
            configuration.databasePath = "\(dataDir)/manager.sqlite"
            configuration.signingKeyPath = "\(dataDir)/signing-key.pem"
            configuration.pinSealingKeyPath = "\(dataDir)/pin-sealing-key.pem"
            configuration.pepperPath = "\(dataDir)/pin-pepper"
            configuration.outboxPath = "\(dataDir)/outbox"
        }
        return configuration
    }

    /// Opens the manager's data (from `configuration`, else the loaded config), runs `body` and closes the database
    /// whatever happens.
    func withManager<T>(
        _ configuration: ManagerConfiguration? = nil, logLevel: Logger.Level = .warning,
        _ body: (IdentityManager) async throws -> T
    ) async throws -> T {
        umask(0o077)
        ManagerLogHandler.install()
        var logger = Logger(label: "xign-manager")
        logger.logLevel = logLevel
        let manager: IdentityManager
        do {
            manager = try await IdentityManager.open(configuration: try configuration ?? load(), logger: logger)
        } catch let error as ValidationError {
            throw error
        } catch {
            throw ValidationError("cannot open the manager's data: \(error)")
        }
        do {
            let result = try await body(manager)
            await manager.database.close()
            return result
        } catch let error as ManagerError {
            await manager.database.close()
            throw ValidationError("\(error)")
        } catch {
            await manager.database.close()
            throw error
        }
    }
}

extension ConfigOptions {
    /// Creates an account, sends its mail now (no relay loop runs in this process) and prints the PIN, once.
    func createAccount(email: String, loginName: String? = nil, organization: String? = nil, mailed: String) async throws {
        let pin = try await withManager { manager in
            let pin = try await manager.createAccount(email: email, loginName: loginName, organization: organization)
            await manager.sendQueuedMailNow()
            return pin
        }
        print(mailed)
        print("Activation PIN (give it to the user by phone or in person): \(pin)")
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the HTTP server.")

    @OptionGroup var options: ConfigOptions

    @Option(help: "HOST:PORT to listen on; port 0 picks a free port. Overrides server.listen.")
    var listen: String?

    @Option(help: "Write the bound port to this file once listening (for scripts and tests).")
    var portFile: String?

    func run() async throws {
        var configuration = try options.load()
        if let listen {
            guard let address = ManagerConfiguration.listenAddress(listen) else {
                throw ValidationError("--listen must be HOST:PORT, for example 127.0.0.1:8440")
            }
            (configuration.listenHost, configuration.listenPort) = address
        }
        let portFile = self.portFile
        try await options.withManager(configuration, logLevel: .info) { manager in
            try await manager.settleAbandonedPINChecks()
            let app = try buildApplication(manager: manager) { port in
                if let portFile { try? AtomicFile.write(Data("\(port)\n".utf8), to: portFile, mode: 0o644) }
                let line = "xign-manager listening on \(manager.managerURL) (key \(manager.health().managerKeyFingerprint))\n"
                FileHandle.standardOutput.write(Data(line.utf8))
            }
            try await app.runService()
        }
    }
}

struct Admin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Inspect and change accounts, activations, lockouts and the outbox.",
        subcommands: [Accounts.self, Activations.self, Unlock.self, Reissue.self, Invite.self, Outbox.self, Hosts.self, Audit.self]
    )

    struct Accounts: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List and add accounts, or give one the login name hosts ask for.",
            subcommands: [List.self, Add.self, SetLogin.self, SetHostGroups.self, KeepOpenHostAccess.self, SetOffline.self],
            defaultSubcommand: List.self
        )

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Create an account and mail its activation data (the way in when registration.open = false).",
                discussion: "The activation PIN is printed here, once: hand it over by another channel than mail."
            )
            @OptionGroup var options: ConfigOptions
            @Argument(help: "The user's email address.") var email: String
            @Option(help: "The local login name hosts ask for.") var loginName: String?

            func run() async throws {
                try await options.createAccount(email: email, loginName: loginName, mailed: "Activation data mailed to \(email).")
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List accounts.")
            @OptionGroup var options: ConfigOptions
            @Flag(help: "Print JSON.") var json = false

            func run() async throws {
                let accounts = try await options.withManager { try await $0.accounts() }
                if json { return try printJSON(accounts) }
                for account in accounts {
                    let kind = account.isTemporary ? "invited by \(account.organization ?? "?")" : "registered"
                    let hosts =
                        account.hostGroups.contains(IdentityManager.everyHost)
                        ? "every host" : account.hostGroups.isEmpty ? "no host" : "hosts in " + account.hostGroups.joined(separator: ",")
                    let login = account.loginName ?? account.requestedLoginName.map { "- (asked for \($0))" } ?? "-"
                    print("\(account.email)\t\(login)\t\(hosts)\t\(kind)\t\(account.activations) activation(s)")
                }
            }
        }

        struct SetHostGroups: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "set-host-groups",
                abstract: "Let an account log in to hosts in these groups, or to every host with --all (none: to no host)."
            )
            @OptionGroup var options: ConfigOptions
            @Argument(help: "The account's email address.") var email: String
            @Argument(help: "Host groups, as given to `hosts add --group`.") var groups: [String] = []
            @Flag(help: "Every host, now and later.") var all = false

            func validate() throws {
                guard !(all && !groups.isEmpty) else { throw ValidationError("give host groups or --all, not both") }
            }

            func run() async throws {
                try await options.withManager { try await $0.setHostGroups(all ? [IdentityManager.everyHost] : groups, email: email) }
                print(
                    all
                        ? "\(email) may log in to every host."
                        : groups.isEmpty ? "\(email) may log in to no host." : "\(email) may log in to hosts in: \(groups.joined(separator: ", ")).")
            }
        }

        struct KeepOpenHostAccess: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "keep-open-host-access",
                abstract: "Upgrade step: accounts with a login name and no host groups keep access to every host.",
                discussion:
                    "Host access is explicit now: an account without host groups logs in to no host. Before, it logged in to every host. Run this once after the upgrade to keep that for the accounts that have it; give the others groups with set-host-groups."
            )
            @OptionGroup var options: ConfigOptions

            func run() async throws {
                let kept = try await options.withManager { try await $0.keepOpenHostAccess() }
                print(kept.isEmpty ? "No account had open host access to keep." : "These accounts keep access to every host:")
                for email in kept { print("  \(email)") }
            }
        }

        struct SetLogin: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "set-login",
                abstract: "Give an account the local login name that hosts ask for (--clear removes it)."
            )
            @OptionGroup var options: ConfigOptions
            @Argument(help: "The account's email address.") var email: String
            @Argument(help: "The login name, such as the user's name on the servers.") var loginName: String?
            @Flag(help: "Remove the account's login name.") var clear = false

            func validate() throws {
                guard clear == (loginName == nil) else { throw ValidationError("give a login name, or --clear") }
            }

            func run() async throws {
                try await options.withManager { try await $0.setLoginName(loginName, email: email) }
                print(loginName.map { "\(email) logs in to hosts as \($0)." } ?? "\(email) has no login name now.")
            }
        }

        struct SetOffline: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "set-offline",
                abstract: "Give an account its own offline-login policy, or --default to use [offline] in the config.",
                discussion: "The account's devices learn it at their next online login. --grace 0 turns offline login off for the account."
            )
            @OptionGroup var options: ConfigOptions
            @Argument(help: "The account's email address.") var email: String
            @Option(help: "How long after the last online login a device may log in offline, such as 3d or 12h (0: never).") var grace: String?
            @Option(help: "Wrong offline PINs that end offline login until the next online login (1 to 20).") var maxFailures: Int?
            @Flag(name: .customLong("default"), help: "Use the manager's policy again.") var useDefault = false

            func validate() throws {
                guard useDefault == (grace == nil && maxFailures == nil) else {
                    throw ValidationError("give --grace and/or --max-failures, or --default")
                }
                if let grace, ConfigFile.milliseconds(grace) == nil { throw ValidationError("--grace must be a duration such as 3d, 12h or 0") }
            }

            func run() async throws {
                let milliseconds = grace.flatMap(ConfigFile.milliseconds)
                try await options.withManager {
                    try await $0.setOfflinePolicy(graceMilliseconds: milliseconds, maxFailures: maxFailures, email: email)
                }
                if useDefault {
                    print("\(email) uses the manager's offline policy.")
                } else if milliseconds == 0 {
                    print("\(email) may not log in offline.")
                } else {
                    let graceText = grace.map { "for \($0) after the last online login" } ?? "for the manager's grace"
                    let failures = maxFailures.map { "\($0) wrong PINs" } ?? "the manager's number of wrong PINs"
                    print("\(email) may log in offline \(graceText), until \(failures).")
                }
            }
        }
    }

    struct Activations: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List activations with their lockout state.")
        @OptionGroup var options: ConfigOptions
        @Option(help: "Only this account.") var email: String?
        @Flag(help: "Print JSON.") var json = false

        func run() async throws {
            let activations = try await options.withManager { try await $0.activations(email: email) }
            if json { return try printJSON(activations) }
            for a in activations {
                var lock = "not locked"
                if a.permanentlyLocked {
                    lock = "locked permanently"
                } else if a.lockedUntil > Int64(Date().timeIntervalSince1970 * 1000) {
                    lock = "locked until \(Date(timeIntervalSince1970: Double(a.lockedUntil) / 1000))"
                }
                let kind =
                    a.synced.map { $0 ? "synced passkey" : "device-bound passkey" }
                    ?? a.ekIssuer.map { "attested tpm key, EK issuer \($0)" } ?? "\(a.keyKind?.rawValue ?? "-") key"
                let device = a.deviceName.map { name in
                    "\(name) (\(a.platform ?? "-"), \(kind), \((a.factors ?? []).map(\.rawValue).joined(separator: "+")))"
                        + ", enrolled \(a.enrolledAt.map(isoDate) ?? "never"), last used \(a.lastUsedAt.map(isoDate) ?? "never")"
                }
                print("\(a.id)\t\(a.email)\t\(a.alias)\t\(a.state.rawValue)\t\(device ?? "no device")\t\(a.failedAttempts) failure(s), \(lock)")
            }
        }
    }

    struct Unlock: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Lift the lockout of an activation, permanent ones included.")
        @OptionGroup var options: ConfigOptions
        @Argument(help: "The activation id, as `admin activations` prints it.") var activation: String

        func run() async throws {
            try await options.withManager { try await $0.unlock(activationId: activation) }
            print("Lockout lifted for \(activation).")
        }
    }

    struct Reissue: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Mail new activation data for an activation; the data before it stops working.",
            discussion:
                "Activation data is single-use and expires (registration.activation_lifetime). With new data the user moves the activation to another machine (override) or adds one, with the activation's PIN."
        )
        @OptionGroup var options: ConfigOptions
        @Argument(help: "The activation id, as `admin activations` prints it.") var activation: String

        func run() async throws {
            let (email, validUntil) = try await options.withManager { try await $0.reissueActivationData(activationId: activation) }
            print("New activation data mailed to \(email), usable once until \(isoDate(validUntil)).")
        }
    }

    struct Invite: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Invite an email address into an organization.",
            discussion:
                "Creates a temporary account and mails its activation data. The activation PIN is printed here, once: hand it over by another channel than mail."
        )
        @OptionGroup var options: ConfigOptions
        @Option(help: "The address to invite.") var email: String
        @Option(help: "The inviting organization.") var organization: String

        func run() async throws {
            try await options.createAccount(email: email, organization: organization, mailed: "Invitation mailed to \(email).")
        }
    }

    struct Outbox: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List mail queued and not yet delivered (to the SMTP relay or the maildir).")
        @OptionGroup var options: ConfigOptions

        func run() async throws {
            let queued = try await options.withManager { try await $0.queuedMail() }
            if queued.isEmpty { print("No mail is waiting.") }
            for mail in queued {
                let queuedAt = isoDate(mail.queuedAt)
                print("\(mail.recipient)\tqueued \(queuedAt)\t\(mail.attempts) attempt\(mail.attempts == 1 ? "" : "s")")
            }
        }
    }
}

extension Admin {
    struct Audit: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List security events: logins, wrong PINs, lockouts, unlocks, enrolments, revocations and admin actions.",
            discussion: """
                Entries are kept for audit.keep (365 days by default). Those of a deleted account stay too, its address replaced \
                by a keyed hash (deleted-…); --email finds them by the address.
                """
        )
        @OptionGroup var options: ConfigOptions
        @Option(help: "Only events since this long ago (such as 30m, 24h, 7d) or this time (ISO 8601, such as 2026-11-01T00:00:00Z).")
        var since = "24h"
        @Option(help: "Only events of this address, its account deleted or not.") var email: String?
        @Flag(help: "Print JSON.") var json = false

        func run() async throws {
            let now = Date()
            let start: Date
            if let ago = ConfigFile.milliseconds(since) {
                start = now.addingTimeInterval(-Double(ago) / 1000)
            } else if let date = try? Date(since, strategy: .iso8601) {
                start = date
            } else {
                throw ValidationError("--since '\(since.prefix(40))' is neither a duration such as 24h or 7d nor a time such as 2026-11-01T00:00:00Z")
            }
            let events = try await options.withManager { manager in
                let all = try await manager.auditEvents(since: Int64(start.timeIntervalSince1970 * 1000))
                guard let email else { return all }
                let names = [email.lowercased(), manager.pseudonym(ofEmail: email)]
                return all.filter { event in event.email.map { names.contains($0.lowercased()) || names.contains($0) } ?? false }
            }
            if json { return try printJSON(events) }
            if events.isEmpty { print("No events since \(start.formatted(.iso8601)).") }
            for event in events {
                let at = isoDate(event.at)
                let fields = [event.email, event.host.map { "host \($0)" }, event.service.map { "service \($0)" }, event.detail].compactMap { $0 }
                print("\(at)\t\(event.event.rawValue)\t\(fields.joined(separator: ", "))\t\(event.actor)")
            }
        }
    }
}

func printJSON(_ value: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    print(String(decoding: try encoder.encode(value), as: UTF8.self))
}

/// A time from the manager's records (milliseconds since 1970), in ISO 8601.
func isoDate(_ milliseconds: Int64) -> String { Date(timeIntervalSince1970: Double(milliseconds) / 1000).formatted(.iso8601) }
