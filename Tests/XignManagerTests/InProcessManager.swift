import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import NIOConcurrencyHelpers
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
    /// Its config, data directory and database, where a test reads rows and mails and runs `xign-manager admin`.
    let files: ManagerFiles
    private let recorded: RecordedLog

    /// What the manager logged so far, a line per entry.
    var log: String { recorded.text }

    /// Runs `body` against a fresh manager configured by `config` (manager.conf's text) over `database`, closed
    /// afterwards.
    static func run(
        config: String = ManagerFiles.testConfig, database: TestDatabase = .sqlite,
        _ body: @escaping @Sendable (InProcessManager) async throws -> Void
    ) async throws {
        guard !holdsPermit else { return try await opened(config: config, database: database, body) }
        try await running.holding {
            try await $holdsPermit.withValue(true) { try await opened(config: config, database: database, body) }
        }
    }

    /// In-process managers that run at once. Their handlers and services share this process's concurrency threads (as
    /// many as cores), and with every suite's managers at once (60 on two cores, a load average of 10) a login's
    /// requests outlived its 7 s budget and were answered 503 busy.
    private static let running = Permits(count: 2 * ProcessInfo.processInfo.activeProcessorCount)
    /// A test that runs a second manager inside the first takes no second permit, which could wait for ever.
    @TaskLocal private static var holdsPermit = false

    private static func opened(
        config: String, database: TestDatabase, _ body: @escaping @Sendable (InProcessManager) async throws -> Void
    ) async throws {
        // Making a PostgreSQL database (psql, and at the first one initdb) blocks for seconds: not on a shared thread,
        // where every in-process manager's handlers run and would wait past a login's budget.
        let files = try await onOwnThread { try ManagerFiles(config: config, database: database) }
        let configuration = try files.configuration()
        // swift-metrics takes one factory per process: /metrics needs a manager of its own (ManagerProcess).
        guard configuration.metricsListen == nil else {
            throw TestFailure("an in-process manager serves no /metrics; start a ManagerProcess for that")
        }
        let recorded = RecordedLog()
        try await IdentityManager.opened(configuration, logger: Logger(label: "in-process") { _ in recorded }) {
            manager in
            try await buildApplication(manager: manager).test(.router) { client in
                // The manager's services stay on the shared threads; the test and the requests it makes, which the
                // router answers in the test's own task, get a thread of their own.
                try await onThreadOfItsOwn {
                    try await body(InProcessManager(manager: manager, client: client, files: files, recorded: recorded))
                }
            }
        }
    }

    /// The API helper over this manager's router.
    var api: API<ManagerFiles> { API(self) }

    /// The manager's own origin, as its pages are served from.
    var origin: String { manager.relyingParty.origin }

    func execute(
        _ method: HTTPRequest.Method, _ path: String, headers: HTTPFields = [:], body: String = ""
    ) async throws -> TestResponse {
        try await client.execute(
            uri: path, method: method, headers: headers, body: body.isEmpty ? nil : ByteBuffer(string: body))
    }
}

extension ManagerFiles {
    /// The configuration `xign-manager serve` would run with: this manager.conf, the data in the data directory.
    func configuration() throws -> ManagerConfiguration {
        var configuration = try ManagerConfiguration(
            file: ConfigFile(text: String(contentsOfFile: configPath, encoding: .utf8), source: configPath))
        configuration.keepData(in: dataDirectory)
        return configuration
    }
}

extension IdentityManager {
    /// Opens a manager with `configuration`, runs `body` with it, and closes its database whatever happens.
    static func opened(
        _ configuration: ManagerConfiguration, logger: Logger, _ body: (IdentityManager) async throws -> Void
    ) async throws {
        let manager = try await IdentityManager.open(configuration: configuration, logger: logger)
        do { try await body(manager) } catch {
            await manager.database.close()
            throw error
        }
        await manager.database.close()
    }
}

/// A log kept in memory, for the test to read.
private struct RecordedLog: LogHandler {
    private let lines = NIOLockedValueBox<[String]>([])
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .info

    var text: String { lines.withLockedValue { $0.joined(separator: "\n") } }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        lines.withLockedValue { $0.append("\(event.level) \(event.message)") }
    }
}
