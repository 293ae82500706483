import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import XignManagerConfiguration
import XignProtocol
import XignTestSupport

@testable import XignManager

/// The manager's application in this test process, over SQLite in a temporary directory, driven through its router
/// with HummingbirdTesting: no process and no socket. The API contract (codes, refusal order, headers) is checked here;
/// real processes stay for what needs them: a crash, durability, several instances, TLS, network abuse, the clients.
struct InProcessManager: Sendable {
    let manager: IdentityManager
    let client: any TestClientProtocol

    /// Runs `body` against a fresh manager configured by `config` (manager.conf's text), closed afterwards.
    static func run(
        config: String = ManagerProcess.testConfig, _ body: @escaping @Sendable (InProcessManager) async throws -> Void
    )
        async throws
    {
        let directory = TemporaryDirectory()
        var configuration = try ManagerConfiguration(file: ConfigFile(text: config, source: "test"))
        configuration.keepData(in: directory.file("manager"))
        let manager = try await IdentityManager.open(configuration: configuration, logger: Logger(label: "in-process"))
        do {
            try await buildApplication(manager: manager).test(.router) { client in
                try await body(InProcessManager(manager: manager, client: client))
            }
        } catch {
            await manager.database.close()
            throw error
        }
        await manager.database.close()
    }

    /// The manager's own origin, as its pages are served from.
    var origin: String { manager.relyingParty.origin }

    func execute(
        _ method: HTTPRequest.Method, _ path: String, headers: HTTPFields = [:], body: String = ""
    ) async throws -> TestResponse {
        try await client.execute(
            uri: path, method: method, headers: headers, body: body.isEmpty ? nil : ByteBuffer(string: body))
    }
}
