import ArgumentParser
import Foundation
import Hummingbird
import Logging
import XignDevice
import XignManager
import XignManagerConfiguration
import XignProtocol

extension Admin {
    struct Audit: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "List security events: logins, wrong PINs, lockouts, unlocks, enrolments, revocations and admin actions.",
            discussion: """
                Entries are kept for audit.keep (365 days by default). Those of a deleted account stay too, its address replaced \
                by a keyed hash (deleted-…); --email finds them by the address.
                """
        )
        @OptionGroup var options: ConfigOptions
        @Option(
            help:
                "Only events since this long ago (such as 30m, 24h, 7d) or this time (ISO 8601, such as 2026-11-01T00:00:00Z)."
        )
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
                throw ValidationError(
                    "--since '\(since.prefix(40))' is neither a duration such as 24h or 7d nor a time such as 2026-11-01T00:00:00Z"
                )
            }
            let events = try await options.withManager { manager in
                let all = try await manager.administration.auditEvents(since: Int64(start.timeIntervalSince1970 * 1000))
                guard let email else { return all }
                let names = [email.lowercased(), manager.administration.pseudonym(ofEmail: email)]
                return all.filter { event in
                    event.email.map { names.contains($0.lowercased()) || names.contains($0) } ?? false
                }
            }
            if json { return try printJSON(events) }
            if events.isEmpty { print("No events since \(start.formatted(.iso8601)).") }
            for event in events {
                let at = isoDate(event.at)
                let fields = [
                    event.email, event.host.map { "host \($0)" }, event.service.map { "service \($0)" }, event.detail,
                ].compactMap { $0 }
                print("\(at)\t\(event.event.rawValue)\t\(fields.joined(separator: ", "))\t\(event.actor)")
            }
        }
    }
}
