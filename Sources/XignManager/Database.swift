import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SQLKit
import SQLiteKit

/// The manager's store. All SQL is written once, in a dialect SQLite and PostgreSQL both accept
/// (RETURNING, ON CONFLICT, BIGINT times in milliseconds), so one schema and one test suite serve both.
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
    public func transaction<T: Sendable>(_ body: @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
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

    /// Each entry takes the schema from version i to i + 1.
    static let migrations = [schema, authenticationSchema, mergeSchema, pinCheckSchema]
    static var schemaVersion: Int { migrations.count }

    private func migrate() async throws {
        try await transaction { sql in
            try await sql.raw("CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)").run()
            let current = try await sql.raw("SELECT version FROM schema_version").first()
                .map { try $0.decode(column: "version", as: Int.self) } ?? 0
            guard current < Self.schemaVersion else {
                guard current == Self.schemaVersion else {
                    throw ManagerError.internalFailure("database schema version \(current) is newer than this manager (\(Self.schemaVersion)); upgrade xign-manager")
                }
                return
            }
            for step in Self.migrations[current...] {
                for statement in step { try await sql.raw(SQLQueryString(statement)).run() }
            }
            try await sql.raw("DELETE FROM schema_version").run()
            try await sql.raw("INSERT INTO schema_version (version) VALUES (\(bind: Self.schemaVersion))").run()
        }
    }

    /// PIN checks of one activation run one at a time; the claim is a row value, so it holds across instances.
    static let pinCheckSchema = [
        "ALTER TABLE activations ADD COLUMN pin_check_until BIGINT NOT NULL DEFAULT 0",
    ]

    /// Organization-invite merges: more addresses per account, and which device may confirm a merge.
    static let mergeSchema = [
        """
        CREATE TABLE account_emails (
            email TEXT PRIMARY KEY,
            account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE
        )
        """,
        "ALTER TABLE personalization_sessions ADD COLUMN merge_device_id TEXT",
        "ALTER TABLE authentications ADD COLUMN merge_session_id TEXT",
    ]

    static let authenticationSchema = [
        """
        CREATE TABLE authentications (
            id TEXT PRIMARY KEY,
            device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
            activation_id TEXT NOT NULL REFERENCES activations(id) ON DELETE CASCADE,
            service TEXT NOT NULL,
            host TEXT NOT NULL,
            local_user TEXT NOT NULL,
            challenge TEXT,
            expires_at BIGINT NOT NULL,
            role TEXT,
            code TEXT UNIQUE,
            code_expires_at BIGINT,
            attributes TEXT
        )
        """,
    ]

    static let schema = [
        """
        CREATE TABLE accounts (
            id TEXT PRIMARY KEY,
            email TEXT NOT NULL UNIQUE,
            attributes TEXT NOT NULL,
            arbitrary_attributes TEXT,
            service_mapping_id TEXT,
            organization TEXT,
            is_temporary BIGINT NOT NULL,
            created_at BIGINT NOT NULL
        )
        """,
        """
        CREATE TABLE activations (
            id TEXT PRIMARY KEY,
            account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
            alias TEXT NOT NULL,
            secret_hash TEXT NOT NULL,
            pin_salt TEXT NOT NULL,
            pin_verifier TEXT NOT NULL,
            pin_iterations BIGINT NOT NULL,
            state TEXT NOT NULL,
            device_id TEXT,
            ever_personalized BIGINT NOT NULL,
            failed_attempts BIGINT NOT NULL,
            locked_until BIGINT NOT NULL,
            permanently_locked BIGINT NOT NULL,
            created_at BIGINT NOT NULL
        )
        """,
        "CREATE INDEX activations_account ON activations (account_id)",
        """
        CREATE TABLE devices (
            id TEXT PRIMARY KEY,
            activation_id TEXT NOT NULL REFERENCES activations(id) ON DELETE CASCADE,
            public_key TEXT NOT NULL,
            key_kind TEXT NOT NULL,
            name TEXT NOT NULL,
            platform TEXT NOT NULL,
            revoked BIGINT NOT NULL,
            created_at BIGINT NOT NULL
        )
        """,
        "CREATE INDEX devices_activation ON devices (activation_id)",
        """
        CREATE TABLE personalization_sessions (
            id TEXT PRIMARY KEY,
            activation_id TEXT NOT NULL REFERENCES activations(id) ON DELETE CASCADE,
            outcome TEXT NOT NULL,
            challenge TEXT NOT NULL,
            expires_at BIGINT NOT NULL
        )
        """,
        "CREATE TABLE manager_settings (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
        """
        CREATE TABLE device_challenges (
            challenge TEXT PRIMARY KEY,
            device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
            expires_at BIGINT NOT NULL
        )
        """,
    ]
}

/// A FIFO lock for async code. Actor isolation alone is not enough: an actor is re-entered at every await.
final class AsyncLock: @unchecked Sendable {
    private let mutex = NIOLock()
    private var locked = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func withLock<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let runNow = mutex.withLock { () -> Bool in
                if locked {
                    waiters.append(continuation)
                    return false
                }
                locked = true
                return true
            }
            if runNow { continuation.resume() }
        }
    }

    private func release() {
        let next = mutex.withLock { () -> CheckedContinuation<Void, Never>? in
            if waiters.isEmpty {
                locked = false
                return nil
            }
            return waiters.removeFirst()
        }
        next?.resume()
    }
}

/// FIFO locks by key: work for one key waits its turn while other keys run. An entry lives while it is used.
final class KeyedAsyncLock: @unchecked Sendable {
    private let mutex = NIOLock()
    private var locks: [String: (lock: AsyncLock, users: Int)] = [:]

    func withLock<T: Sendable>(_ key: String, _ body: () async throws -> T) async throws -> T {
        let lock = mutex.withLock { () -> AsyncLock in
            let entry = locks[key] ?? (AsyncLock(), 0)
            locks[key] = (entry.lock, entry.users + 1)
            return entry.lock
        }
        defer {
            mutex.withLock {
                if let entry = locks[key] { locks[key] = entry.users > 1 ? (entry.lock, entry.users - 1) : nil }
            }
        }
        return try await lock.withLock(body)
    }
}
