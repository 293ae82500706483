import ArgumentParser
import Foundation
import Hummingbird
import Logging
import XignDevice
import XignManager
import XignManagerConfiguration
import XignProtocol

extension Admin {
    struct Accounts: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List and add accounts, or give one the login name hosts ask for.",
            subcommands: [
                List.self, Add.self, SetLogin.self, SetLocalUser.self, SetHostGroups.self, KeepOpenHostAccess.self,
                SetOffline.self, Delete.self, SetRole.self, Lock.self, Unlock.self, RevokeDevice.self, Covers.self,
            ],
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
                try await options.createAccount(
                    email: email, loginName: loginName, mailed: "Activation data mailed to \(email).")
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "List accounts in address order, a page at a time.")
            @OptionGroup var options: ConfigOptions
            @OptionGroup var paging: PageOptions
            @Flag(help: "Print JSON.") var json = false

            func run() async throws {
                let page = try paging.page()
                let accounts = try await options.withManager { try await $0.administration.accounts(page) }
                defer { paging.reportNext(of: accounts, command: "accounts list") }
                if json { return try printJSON(accounts.entries) }
                for account in accounts.entries {
                    let kind = account.isTemporary ? "invited by \(account.organization ?? "?")" : "registered"
                    let hosts =
                        account.hostGroups.contains(IdentityManager.everyHost)
                        ? "every host"
                        : account.hostGroups.isEmpty
                            ? "no host" : "hosts in " + account.hostGroups.joined(separator: ",")
                    let login =
                        account.loginName.map { name in
                            account.uid.map { "\(name) (uid=gid=\($0))" } ?? name
                        } ?? account.requestedLoginName.map { "- (asked for \($0))" } ?? "-"
                    let groups =
                        (account.localGroups.isEmpty ? "" : " (joins \(account.localGroups.joined(separator: ",")))")
                        + (account.mapsLocalUser ? " (hosts' own local user)" : "")
                    print(
                        "\(account.email)\t\(login)\t\(hosts)\(groups)\t\(kind)\t\(account.activations) activation(s)")
                }
            }
        }

        struct SetHostGroups: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "set-host-groups",
                abstract:
                    "Let an account log in to hosts in these groups, or to every host with --all (none: to no host)."
            )
            @OptionGroup var options: ConfigOptions
            @Argument(help: "The account's email address.") var email: String
            @Argument(help: "Host groups, as given to `hosts add --group`.") var groups: [String] = []
            @Flag(help: "Every host, now and later.") var all = false

            func validate() throws {
                guard !(all && !groups.isEmpty) else { throw ValidationError("give host groups or --all, not both") }
            }

            func run() async throws {
                try await options.withManager {
                    try await $0.administration.setHostGroups(all ? [IdentityManager.everyHost] : groups, email: email)
                }
                print(
                    all
                        ? "\(email) may log in to every host."
                        : groups.isEmpty
                            ? "\(email) may log in to no host."
                            : "\(email) may log in to hosts in: \(groups.joined(separator: ", ")).")
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
                let kept = try await options.withManager { try await $0.administration.keepOpenHostAccess() }
                print(
                    kept.isEmpty
                        ? "No account had open host access to keep." : "These accounts keep access to every host:")
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
                try await options.withManager { try await $0.administration.setLoginName(loginName, email: email) }
                print(loginName.map { "\(email) logs in to hosts as \($0)." } ?? "\(email) has no login name now.")
            }
        }

        struct SetLocalUser: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "set-local-user",
                abstract:
                    "Let hosts log an account in as their own local user of its login name, whatever its uid (yes), or not (no).",
                discussion:
                    "By default a host confirms a login only to the manager's own user of that name: the account's uid, which hosts with libnss-xign serve. A host whose users were made by hand has them under other uids; set yes for the accounts that log in there. Accounts that had a login name before this check existed were set to yes at the upgrade."
            )
            @OptionGroup var options: ConfigOptions
            @Argument(help: "The account's email address.") var email: String
            @Argument(help: "yes or no.") var choice: String

            func validate() throws {
                guard ["yes", "no"].contains(choice) else { throw ValidationError("say yes or no") }
            }

            func run() async throws {
                try await options.withManager {
                    try await $0.administration.setMapsLocalUser(choice == "yes", email: email)
                }
                print(
                    choice == "yes"
                        ? "Hosts may log \(email) in as their own local user of its login name."
                        : "Hosts log \(email) in only as the manager's own user, with the account's uid.")
            }
        }

        struct SetRole: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "set-role",
                abstract: "Give an account a role in the console (admin or helpdesk), or take it (none).",
                discussion:
                    "Give the first administrator here; after that, administrators give roles in the console at /console."
            )
            @OptionGroup var options: ConfigOptions
            @Argument(help: "The account's email address.") var email: String
            @Argument(help: "admin, helpdesk or none.") var role: String

            func validate() throws {
                guard role == "none" || ConsoleRole(rawValue: role) != nil else {
                    throw ValidationError("the role is admin, helpdesk or none")
                }
            }

            func run() async throws {
                try await options.withManager {
                    try await $0.administration.setRole(ConsoleRole(rawValue: role), email: email)
                }
                print(role == "none" ? "\(email) has no console role now." : "\(email) is \(role) in the console.")
            }
        }

        struct Lock: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Lock an account: none of its devices logs in or approves until it is unlocked.")
            @OptionGroup var options: ConfigOptions
            @Argument(help: "The account's email address.") var email: String

            func run() async throws {
                try await options.withManager { try await $0.administration.lockAccount(email: email) }
                print("\(email) is locked.")
            }
        }

        struct Unlock: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Unlock an account, and clear the wrong PINs of all its activations.")
            @OptionGroup var options: ConfigOptions
            @Argument(help: "The account's email address.") var email: String

            func run() async throws {
                try await options.withManager { try await $0.administration.unlockAccount(email: email) }
                print("\(email) is unlocked.")
            }
        }

        struct RevokeDevice: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "revoke-device",
                abstract: "Remove one device of an account (a lost laptop or phone); the account keeps its others.",
                discussion: "The device is refused at its next login. `admin activations --json` lists the device ids."
            )
            @OptionGroup var options: ConfigOptions
            @Argument(help: "The account's email address.") var email: String
            @Argument(help: "The device's id.") var device: String

            func run() async throws {
                try await options.withManager { try await $0.administration.revokeDevice(device, email: email) }
                print("Device \(device) of \(email) is removed.")
            }
        }

        struct Delete: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Delete an account with its activations and devices (offboarding); hosts stop serving it.",
                discussion:
                    "Its devices stop working at once. Hosts drop its user at their next directory refresh; its uid is never given to another account."
            )
            @OptionGroup var options: ConfigOptions
            @Argument(help: "The account's email address.") var email: String

            func run() async throws {
                let devices = try await options.withManager { try await $0.administration.deleteAccount(email: email) }
                print("\(email) deleted, with \(devices) device(s).")
            }
        }

        struct SetOffline: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "set-offline",
                abstract: "Give an account its own offline-login policy, or --default to use [offline] in the config.",
                discussion:
                    "The account's devices learn it at their next online login. --grace 0 turns offline login off for the account."
            )
            @OptionGroup var options: ConfigOptions
            @Argument(help: "The account's email address.") var email: String
            @Option(
                help: "How long after the last online login a device may log in offline, such as 3d or 12h (0: never).")
            var grace: String?
            @Option(help: "Wrong offline PINs that end offline login until the next online login (1 to 20).")
            var maxFailures: Int?
            @Flag(name: .customLong("default"), help: "Use the manager's policy again.") var useDefault = false

            func validate() throws {
                guard useDefault == (grace == nil && maxFailures == nil) else {
                    throw ValidationError("give --grace and/or --max-failures, or --default")
                }
                if let grace, ConfigFile.milliseconds(grace) == nil {
                    throw ValidationError("--grace must be a duration such as 3d, 12h or 0")
                }
            }

            func run() async throws {
                let milliseconds = grace.flatMap(ConfigFile.milliseconds)
                try await options.withManager {
                    try await $0.administration.setOfflinePolicy(
                        graceMilliseconds: milliseconds, maxFailures: maxFailures, email: email)
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
}
