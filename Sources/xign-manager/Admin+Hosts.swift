import ArgumentParser
import XignManager
import XignProtocol

/// `xign-manager admin hosts`: servers that ask their users to confirm logins.
extension Admin {
    struct Hosts: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Servers that ask for login confirmations: add (a one-time join token), list, remove.",
            subcommands: [Add.self, List.self, Remove.self]
        )

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Issue a one-time join token for a new host.",
                discussion:
                    "Give the printed token to the host's administrator, who runs `xign-setup host join --manager URL` and pastes it. It works once, until it expires."
            )
            @OptionGroup var options: ConfigOptions
            @Argument(help: "The host's name, as users will see it when they approve a login.") var name: String
            @Option(
                name: .customLong("group"),
                help: "A host group (repeatable); accounts with host groups log in only to hosts that share one.")
            var groups: [String] = []
            @Option(help: "How long the token lasts, in minutes (1 to 10080).") var validMinutes = 60

            func validate() throws {
                guard (1...10_080).contains(validMinutes) else {
                    throw ValidationError("--valid-minutes must be from 1 to 10080")
                }
            }

            func run() async throws {
                let token = try await options.withManager {
                    try await $0.administration.addHost(
                        name: name, groups: groups, validFor: .seconds(validMinutes * 60))
                }
                print("Join token for \(name) (valid \(validMinutes) min, once): \(token)")
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "List the hosts that joined, in name order, a page at a time.")
            @OptionGroup var options: ConfigOptions
            @OptionGroup var paging: PageOptions
            @Flag(help: "Print JSON.") var json = false

            func run() async throws {
                let page = try paging.page()
                let hosts = try await options.withManager { try await $0.administration.hosts(page) }
                defer { paging.reportNext(of: hosts, command: "hosts list") }
                if json { return try printJSON(hosts.entries) }
                for host in hosts.entries {
                    print(
                        "\(host.name)\t\(host.id)\t\(host.groups.isEmpty ? "-" : host.groups.joined(separator: ","))\t\(host.keyKind)\(host.ekIssuer.map { " (EK issuer \($0))" } ?? "")\t\(host.keyFingerprint)"
                    )
                }
            }
        }

        struct Remove: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Remove a host (or the join token waiting for it); it can no longer ask for confirmations.")
            @OptionGroup var options: ConfigOptions
            @Argument(help: "The host's name.") var name: String

            func run() async throws {
                try await options.withManager { try await $0.administration.removeHost(name: name) }
                print("Host \(name) removed.")
            }
        }
    }
}

/// `xign-manager admin groups`: what a host group's members are on its hosts.
extension Admin {
    struct Groups: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Map host groups to the local groups (sudo, docker, ...) their members join on the hosts in them, and set what sudo needs there.",
            subcommands: [List.self, SetLocal.self, SetSudo.self]
        )

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "List each host group's local groups and sudo policies.")

            struct Listing: Encodable {
                var localGroups: [String: [String]]
                var sudoPolicies: [String: [String: SudoPolicy]]
            }

            @OptionGroup var options: ConfigOptions
            @Flag(help: "Print JSON.") var json = false

            func run() async throws {
                let (mappings, policies) = try await options.withManager {
                    (try await $0.administration.localGroups(), try await $0.administration.sudoPolicies())
                }
                if json { return try printJSON(Listing(localGroups: mappings, sudoPolicies: policies)) }
                if mappings.isEmpty {
                    print("No host group maps to local groups. Add one with `admin groups set-local`.")
                }
                for (group, local) in mappings.sorted(by: { $0.key < $1.key }) {
                    print("\(group)\t\(local.joined(separator: ","))")
                }
                for (group, services) in policies.sorted(by: { $0.key < $1.key }) {
                    let lines = services.sorted(by: { $0.key < $1.key }).map { "\($0.key)=\($0.value.rawValue)" }
                    print("\(group)\tsudo policy \(lines.joined(separator: ","))")
                }
            }
        }

        struct SetLocal: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "set-local",
                abstract: "Have members of a host group join these local groups on its hosts (none: no local group).",
                discussion: """
                    The local groups must exist on the hosts (`getent group sudo`); a host serves only those it has, \
                    and never makes a group. Mapping `sudo` lets the members use sudo through Debian's `%sudo` rule, \
                    which asks for the same XignIn confirmation as a login when sudo's PAM stack has pam_xign.
                    """
            )
            @OptionGroup var options: ConfigOptions
            @Argument(help: "The host group, as given to `hosts add --group`.") var hostGroup: String
            @Argument(help: "Local group names.") var localGroups: [String] = []

            func run() async throws {
                try await options.withManager {
                    try await $0.administration.setLocalGroups(localGroups, hostGroup: hostGroup)
                }
                print(
                    localGroups.isEmpty
                        ? "Members of \(hostGroup) join no local group."
                        : "Members of \(hostGroup) join \(localGroups.joined(separator: ", ")) on its hosts.")
            }
        }
    }
}
