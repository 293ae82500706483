import ArgumentParser
import Foundation
import Hummingbird
import Logging
import XignDevice
import XignManager
import XignManagerConfiguration
import XignProtocol

extension Admin {
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
            try await options.createAccount(
                email: email, organization: organization, mailed: "Invitation mailed to \(email).")
        }
    }

    struct Outbox: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List mail queued and not yet delivered (to the SMTP relay or the maildir).")
        @OptionGroup var options: ConfigOptions

        func run() async throws {
            let queued = try await options.withManager { try await $0.mail.queued() }
            if queued.isEmpty { print("No mail is waiting.") }
            for mail in queued {
                let queuedAt = isoDate(mail.queuedAt)
                print("\(mail.recipient)\tqueued \(queuedAt)\t\(mail.attempts) attempt\(mail.attempts == 1 ? "" : "s")")
            }
        }
    }
}
