import ArgumentParser
import XignManager

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
            static let configuration = CommandConfiguration(abstract: "List the hosts that joined.")
            @OptionGroup var options: ConfigOptions
            @Flag(help: "Print JSON.") var json = false

            func run() async throws {
                let hosts = try await options.withManager { try await $0.administration.hosts() }
                if json { return try printJSON(hosts) }
                for host in hosts {
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
