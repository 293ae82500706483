import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SQLKit
import SQLiteKit

/// The manager's database: one connection, transactions one at a time, the schema kept current.
/// Everything a transaction reads or writes goes through the `ManagerStore` it is handed.
public final class Database: Sendable {
    private let connection: SQLiteConnection
    private let lock = AsyncLock()
    private let logger: Logger

    private init(connection: SQLiteConnection, logger: Logger) {
        self.connection = connection
        self.logger = logger
    }

    /// Opens (and creates) the SQLite file in WAL mode and brings the schema up to date.
    public static func openSQLite(path: String, logger: Logger) async throws -> Database {
        let connection = try await SQLiteConnection.open(storage: .file(path: path), logger: logger)
        let database = Database(connection: connection, logger: logger)
        let sql = connection.sql()
        for pragma in ["PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA busy_timeout=5000", "PRAGMA foreign_keys=ON"] {
            try await sql.raw(SQLQueryString(pragma)).run()
        }
        try await database.migrate()
        return database
    }

    public func close() async {
        try? await connection.close().get()
    }

    /// Runs `body` in one transaction. Transactions run one at a time; SQLite allows one writer anyway.
    public func transaction<T: Sendable>(_ body: @Sendable (ManagerStore) async throws -> T) async throws -> T {
        try await inTransaction { sql in try await body(ManagerStore(sql: sql)) }
    }

    private func migrate() async throws {
        try await inTransaction { sql in try await Schema.migrate(sql) }
    }

    private func inTransaction<T: Sendable>(_ body: @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        try await lock.withLock {
            let sql = connection.sql()
            try await sql.raw("BEGIN IMMEDIATE").run()
            do {
                let result = try await body(sql)
                try await sql.raw("COMMIT").run()
                return result
            } catch {
                do { try await sql.raw("ROLLBACK").run() } catch { logger.error("rollback failed: \(error)") }
                throw error
            }
        }
    }
}
