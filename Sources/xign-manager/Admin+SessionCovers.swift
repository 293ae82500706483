import ArgumentParser
import Foundation
import XignManager
import XignProtocol

/// `xign-manager admin groups set-sudo` and `admin accounts covers`: an approval that covers its session.
extension Admin.Groups {
    struct SetSudo: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set-sudo",
            abstract: "Set what a sudo in an approved SSH session needs on a host group's hosts.",
            discussion: """
                fresh (the default): every sudo asks for a new approval. session: the approval of the SSH login \
                covers sudo in that login's session (its kernel audit session) until it closes, an administrator \
                ends the cover, the account is locked, or confirmation.session_cover (8 hours at most) runs out. \
                default removes the group's line. Where a host's groups disagree, the strictest line wins.
                """
        )
        @OptionGroup var options: ConfigOptions
        @Argument(help: "The host group, as given to `hosts add --group`, or * for every host.") var hostGroup: String
        @Argument(help: "fresh, session, or default.") var policy: String
        @Option(help: "The PAM service (sudo, sudo-i, su, ...); * for every service the group names no policy for.")
        var service = SudoPolicy.everyService

        func validate() throws {
            guard policy == "default" || SudoPolicy(rawValue: policy) != nil else {
                throw ValidationError("the policy is fresh, session or default, not '\(policy.prefix(32))'")
            }
        }

        func run() async throws {
            let chosen = SudoPolicy(rawValue: policy)
            try await options.withManager {
                try await $0.administration.setSudoPolicy(chosen, service: service, hostGroup: hostGroup)
            }
            print(Administration.sudoPolicySet(chosen, service: service, hostGroup: hostGroup))
        }
    }
}

extension Admin.Accounts {
    struct Covers: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the sessions an account's approvals cover now, or end them (--end).")
        @OptionGroup var options: ConfigOptions
        @Argument(help: "The account's email address.") var email: String
        @Flag(help: "End the covers: the next sudo in those sessions asks for an approval.") var end = false
        @Option(help: "With --end: only this cover.") var cover: String?
        @Flag(help: "Print JSON.") var json = false

        func validate() throws {
            if cover != nil && !end { throw ValidationError("--cover goes with --end") }
        }

        func run() async throws {
            if end {
                let count = try await options.withManager {
                    try await $0.administration.endSessionCovers(email: email, coverId: cover)
                }
                return print("Ended \(count) cover(s) of \(email).")
            }
            let covers = try await options.withManager { try await $0.administration.sessionCovers(email: email) }
            if json { return try printJSON(covers) }
            if covers.isEmpty { print("No session of \(email) is covered now.") }
            for cover in covers {
                let until = Date(timeIntervalSince1970: Double(cover.expiresAt) / 1000)
                print(
                    "\(cover.id)\t\(cover.host)\t\(cover.loginName)\taudit session \(cover.auditSession)\tapproval \(cover.approval)\tuntil \(until.ISO8601Format())"
                )
            }
        }
    }
}
