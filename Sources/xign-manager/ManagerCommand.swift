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
