import ArgumentParser
import Foundation
import Hummingbird
import Logging
import XignDevice
import XignManager
import XignManagerConfiguration
import XignProtocol

struct Admin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Inspect and change accounts, activations, lockouts and the outbox.",
        subcommands: [
            Accounts.self, Activations.self, Unlock.self, Reissue.self, Invite.self, Outbox.self, Hosts.self,
            Groups.self,
            Audit.self,
        ]
    )
}

func printJSON(_ value: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    print(String(decoding: try encoder.encode(value), as: UTF8.self))
}

/// A time from the manager's records (milliseconds since 1970), in ISO 8601.
func isoDate(_ milliseconds: Int64) -> String {
    Date(timeIntervalSince1970: Double(milliseconds) / 1000).formatted(.iso8601)
}
