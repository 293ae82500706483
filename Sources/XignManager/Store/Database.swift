import Foundation
import Logging
import NIOCore
import PostgresKit
import SQLKit
import XignManagerConfiguration
import XignProtocol

/// The manager's database, SQLite or PostgreSQL, with the schema kept current. Every request's work is one
/// serializable transaction, on both: SQLite runs them one at a time; PostgreSQL runs them side by side at
/// SERIALIZABLE and runs one again when the server reports a conflict, so several manager instances on one
/// database behave as one. Everything a transaction reads or writes goes through the `ManagerStore` it is handed.
public final class Database: Sendable {
    enum Backend: Sendable {
        /// The writer, and a second connection that only reads (`read`): in WAL mode it reads beside the writer.
        case sqlite(SQLiteConnection, AsyncLock, reader: SQLiteConnection, AsyncLock)
        case postgreSQL(PostgreSQLPool)
    }

    let backend: Backend
    let logger: Logger
    let statements: StatementCounter

    init(backend: Backend, logger: Logger, statements: StatementCounter) {
        self.backend = backend
        self.logger = logger
        self.statements = statements
    }

    /// Opens the database `configuration` names and brings the schema up to date.
    public static func open(_ configuration: ManagerConfiguration, logger: Logger) async throws -> Database {
        if let postgreSQL = configuration.postgreSQL {
            return try await openPostgreSQL(postgreSQL, logger: logger)
        }
        try AtomicFile.makeDirectory(AtomicFile.parent(of: configuration.databasePath))
        return try await openSQLite(path: configuration.databasePath, logger: logger)
    }

    /// Opens (and creates) the SQLite file in WAL mode with synchronous=FULL: a commit is on disk before any answer.
    private static func openSQLite(path: String, logger: Logger) async throws -> Database {
        let statements = StatementCounter()
        let connection = try SQLiteConnection(path: path, counter: statements)
        for pragma in ["PRAGMA journal_mode=WAL", "PRAGMA foreign_keys=ON"] { try await connection.execute(pragma) }
        try await connection.setSynchronous(.synced)
        let reader = try SQLiteConnection(path: path, counter: statements)
        try await reader.execute("PRAGMA query_only=ON")
        let database = Database(
            backend: .sqlite(connection, AsyncLock(), reader: reader, AsyncLock()), logger: logger,
            statements: statements)
        try await database.transaction { store in try await Schema.migrate(store.sql) }
        return database
    }

    public func close() async {
        switch backend {
        case .sqlite(let connection, let lock, let reader, let readLock):
            // Under their locks, so no transaction is cut off mid-way.
            _ = try? await readLock.withLock { reader.close() }
            _ = try? await lock.withLock { connection.close() }
        case .postgreSQL(let pool): await pool.close()
        }
    }

    /// Whether a commit must be on disk before the answer. Most must: lockout charges, used codes, accounts and
    /// activations, the audit. A write whose loss in a power cut only makes the user start again, and tells an
    /// attacker nothing, need not wait for the disk: a new login's challenge, a signed request's challenge.
    public enum Durability: Sendable {
        case synced
        case unsynced
        /// Every answer this transaction allows waits for a later synced commit of the same request, which takes it
        /// to the disk too (the log is written in order): a finish's spent challenge and its PIN check's claim go with
        /// the PIN's verdict. SQLite commits it unsynced, which costs nothing extra. PostgreSQL syncs it: there an
        /// unsynced commit costs a statement (`SET LOCAL`), and in `make bench-manager` it saved no CPU.
        case syncedLater
    }

    /// Runs `body` in one transaction and returns once it committed. `body` may run more than once on PostgreSQL,
    /// so it does nothing outside the database but log.
    public func transaction<T: Sendable>(
        durability: Durability = .synced, _ body: @escaping @Sendable (ManagerStore) async throws -> T
    ) async throws -> T {
        let synced = syncs(durability)
        let result: T
        switch backend {
        case .sqlite(let connection, let lock, _, _):
            result = try await sqliteTransaction(
                on: connection, under: lock, durability: synced ? .synced : .unsynced, body)
        case .postgreSQL(let pool):
            result = try await pool.serializableTransaction(synced ? .synced : .unsynced, logger: logger, body)
        }
        if synced { statements.addSyncedCommit() }
        return result
    }

    /// `body`, one statement that is a transaction by itself (an INSERT … SELECT): PostgreSQL runs it without BEGIN,
    /// SET LOCAL and COMMIT, four round trips fewer, and its commit waits for the disk (and a synchronous standby);
    /// SQLite runs it in an unsynced transaction, as its writer does everything.
    public func statement<T: Sendable>(_ body: @escaping @Sendable (ManagerStore) async throws -> T) async throws -> T {
        switch backend {
        case .sqlite: return try await transaction(durability: .unsynced, body)
        case .postgreSQL(let pool): return try await pool.autocommit(logger: logger, body)
        }
    }

    /// Whether a transaction of this durability waits for the disk here.
    func syncs(_ durability: Durability) -> Bool {
        switch (durability, backend) {
        case (.synced, _), (.syncedLater, .postgreSQL): true
        case (.unsynced, _), (.syncedLater, .sqlite): false
        }
    }

    /// Tells every instance's waiters of `keys` that their rows changed (PostgreSQL's NOTIFY); nothing on SQLite,
    /// whose one instance signals its own waiters.
    func publish(_ keys: [String]) async throws {
        guard case .postgreSQL(let pool) = backend else { return }
        try await pool.publish(keys)
    }

    /// Hands `wake` the keys other instances publish, until cancelled; returns at once on SQLite.
    func listen(logger: Logger, wake: @escaping @Sendable (String) -> Void) async {
        guard case .postgreSQL(let pool) = backend else { return }
        await pool.listen(logger: logger, wake: wake)
    }

    /// Runs `body`, which only reads, in a transaction of its own. On SQLite that is the reading connection, so
    /// the many re-reads of long polls never wait for the writer nor make PIN checks wait for them.
    public func read<T: Sendable>(_ body: @escaping @Sendable (ManagerStore) async throws -> T) async throws -> T {
        switch backend {
        case .sqlite(_, _, let reader, let lock):
            return try await sqliteTransaction(on: reader, under: lock, durability: nil, body)
        case .postgreSQL:
            return try await transaction(durability: .unsynced, body)
        }
    }

    /// A transaction on one of the SQLite connections, which its lock hands to one task at a time. `durability` nil
    /// only reads (the reading connection); otherwise it takes the write lock at BEGIN.
    private func sqliteTransaction<T: Sendable>(
        on connection: SQLiteConnection, under lock: AsyncLock, durability: Durability?,
        _ body: @Sendable (ManagerStore) async throws -> T
    ) async throws -> T {
        try await lock.withLock {
            try await connection.transaction(immediate: durability != nil, durability: durability) {
                try await body(ManagerStore(sql: SQLiteDatabase(connection: connection, logger: logger)))
            }
        }
    }

    static func inTransaction<T: Sendable>(
        _ sql: any SQLDatabase, begin: String, durability: Durability = .synced, logger: Logger,
        _ body: @Sendable (ManagerStore) async throws -> T
    ) async throws -> T {
        try await sql.raw(SQLQueryString(begin)).run()
        do {
            if durability == .unsynced { try await sql.raw("SET LOCAL synchronous_commit = off").run() }
            let result = try await body(ManagerStore(sql: sql))
            try await sql.raw("COMMIT").run()
            return result
        } catch {
            do { try await sql.raw("ROLLBACK").run() } catch { logger.debug("rollback failed: \(error)") }
            throw error
        }
    }
}
