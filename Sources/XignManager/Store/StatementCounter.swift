import Logging
import NIOCore
import SQLKit
import Synchronization

/// Counts the statements the manager sends to its database (`xign_database_statements_total`) and the commits that
/// waited for its disk (`xign_database_synced_commits_total`), so what waiting and logging in cost the database can
/// be measured from outside.
final class StatementCounter: Sendable {
    private let count = Atomic<Int>(0)
    private let synced = Atomic<Int>(0)

    var total: Int { count.load(ordering: .relaxed) }
    var syncedCommits: Int { synced.load(ordering: .relaxed) }

    func addSyncedCommit() { synced.add(1, ordering: .relaxed) }

    /// `database`, counting each statement sent through it.
    func counting(_ database: any SQLDatabase) -> any SQLDatabase { CountedDatabase(base: database, counter: self) }

    func add() { count.add(1, ordering: .relaxed) }

    private let recording = Atomic<Bool>(false)
    private let texts = Mutex<[String]>([])

    /// `body`, and the text of every statement sent while it ran: what a test sees of a login's statements.
    func recordingTexts(_ body: () async throws -> Void) async rethrows -> [String] {
        texts.withLock { $0 = [] }
        recording.store(true, ordering: .relaxed)
        defer { recording.store(false, ordering: .relaxed) }
        try await body()
        return texts.withLock { $0 }
    }

    fileprivate var isRecording: Bool { recording.load(ordering: .relaxed) }
    fileprivate func keep(_ text: String) { texts.withLock { $0.append(text) } }
}

private struct CountedDatabase: SQLDatabase {
    let base: any SQLDatabase
    let counter: StatementCounter

    var logger: Logger { base.logger }
    var eventLoop: any EventLoop { base.eventLoop }
    var version: (any SQLDatabaseReportedVersion)? { base.version }
    var dialect: any SQLDialect { base.dialect }
    var queryLogLevel: Logger.Level? { base.queryLogLevel }

    func execute(
        sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void
    ) -> EventLoopFuture<Void> {
        counter.add()
        if counter.isRecording { counter.keep(serialize(query).sql) }
        return base.execute(sql: query, onRow)
    }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) async throws {
        counter.add()
        if counter.isRecording { counter.keep(serialize(query).sql) }
        try await base.execute(sql: query, onRow)
    }
}
