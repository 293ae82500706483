import ArgumentParser
import Foundation
import Hummingbird
import Logging
import XignDevice
import XignManager
import XignManagerConfiguration
import XignProtocol

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
                let line =
                    "xign-manager listening on \(manager.managerURL) (key \(manager.health().managerKeyFingerprint))\n"
                FileHandle.standardOutput.write(Data(line.utf8))
            }
            try await app.runService()
        }
    }
}
