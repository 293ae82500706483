import CSQLite
import Foundation
import NIOPosix

/// One connection to the manager's SQLite file, through the system's libsqlite3, with its prepared statements kept.
///
/// A login runs some forty statements. Preparing each again, and hopping to a thread pool and back for each, cost
/// more than the statements themselves (docs/design.md, "The manager at scale"). So statements run on the caller's thread,
/// prepared once per connection; only what may wait on the disk or on another process leaves it: a synced
/// commit, and a statement that found the file busy, which runs again on the thread pool with a busy timeout.
///
/// Not safe for concurrent use: `Database` hands each connection to one transaction at a time.
final class SQLiteConnection: @unchecked Sendable {
    /// How long a statement waits on the thread pool for another process's write lock (an admin command).
    static let busyTimeoutMilliseconds: Int32 = 5_000
    /// Prepared statements kept per connection; the manager's fixed SQL needs fewer, lists of ids may vary.
    static let statementCacheLimit = 256

    private let handle: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]
    private let counter: StatementCounter
    /// The `PRAGMA synchronous` in force, so a transaction only switches it when it differs.
    private var synchronous: Database.Durability?

    init(path: String, counter: StatementCounter) throws {
        var opened: OpaquePointer?
        let status = sqlite3_open_v2(
            path, &opened, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nil)
        guard status == SQLITE_OK, let opened else {
            let message = opened.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(status))
            sqlite3_close_v2(opened)
            throw SQLiteError(status: status, message: "cannot open \(path): \(message)")
        }
        handle = opened
        self.counter = counter
        sqlite3_extended_result_codes(handle, 1)
    }

    private var isClosed = false

    deinit { close() }

    /// Finalizes the kept statements and closes the file; a statement after this fails.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        for statement in statements.values { sqlite3_finalize(statement) }
        statements.removeAll()
        sqlite3_close_v2(handle)
    }

    /// Runs one statement and hands each row to `onRow`, on the caller's thread. A statement that finds the file
    /// locked by another process runs again on the thread pool, where waiting for the lock blocks no task.
    func execute(
        _ sql: String, binds: [any Encodable & Sendable] = [], onRow: (SQLiteRow) -> Void = { _ in }
    ) async throws {
        var delivered = false
        do {
            try run(sql, binds: binds) {
                delivered = true
                onRow($0)
            }
        } catch let error as SQLiteError where error.isBusy && !delivered {
            try await waiting(sql, binds: binds).forEach(onRow)
        }
    }

    /// Sets `PRAGMA synchronous` for the transactions to come (the file's own setting is not kept across opens).
    func setSynchronous(_ durability: Database.Durability) async throws {
        try await execute(durability == .synced ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL")
        synchronous = durability
    }

    /// Runs `body` in a transaction: `immediate` takes the write lock at the start; `durability` nil only reads.
    /// A synced commit waits for the disk on the thread pool; one that syncs nothing stays on the caller's thread.
    func transaction<T>(
        immediate: Bool, durability: Database.Durability?, _ body: () async throws -> T
    ) async throws -> T {
        if let durability, durability != synchronous { try await setSynchronous(durability) }
        try await execute(immediate ? "BEGIN IMMEDIATE" : "BEGIN")
        do {
            let result = try await body()
            if durability == .synced { _ = try await waiting("COMMIT") } else { try await execute("COMMIT") }
            return result
        } catch {
            // A failed COMMIT may leave the transaction open.
            if sqlite3_get_autocommit(handle) == 0 { try? run("ROLLBACK") }
            throw error
        }
    }

    /// Runs one statement on the thread pool, where it may wait for the disk or for another process's lock.
    private func waiting(_ sql: String, binds: [any Encodable & Sendable] = []) async throws -> [SQLiteRow] {
        try await NIOThreadPool.singleton.runIfActive {
            sqlite3_busy_timeout(self.handle, Self.busyTimeoutMilliseconds)
            defer { sqlite3_busy_timeout(self.handle, 0) }
            var rows: [SQLiteRow] = []
            try self.run(sql, binds: binds) { rows.append($0) }
            return rows
        }
    }

    /// Prepares (or reuses), binds and steps one statement to its end; the statement is reset for its next use.
    private func run(
        _ sql: String, binds: [any Encodable & Sendable] = [], onRow: (SQLiteRow) -> Void = { _ in }
    ) throws {
        guard !isClosed else { throw SQLiteError(status: SQLITE_MISUSE, message: "the database was closed") }
        counter.add()
        let statement = try prepared(sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        for (offset, value) in binds.enumerated() {
            let status = try SQLiteValue(binding: value).bind(to: statement, at: Int32(offset + 1))
            guard status == SQLITE_OK else { throw failure(status, sql) }
        }
        var columns: [String]?
        while true {
            let status = sqlite3_step(statement)
            if status == SQLITE_DONE { return }
            guard status == SQLITE_ROW else { throw failure(status, sql) }
            let count = sqlite3_column_count(statement)
            let names = columns ?? (0..<count).map { String(cString: sqlite3_column_name(statement, $0)) }
            columns = names
            onRow(SQLiteRow(columns: names, values: (0..<count).map { SQLiteValue(column: $0, of: statement) }))
        }
    }

    private func prepared(_ sql: String) throws -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        if statements.count >= Self.statementCacheLimit {
            for statement in statements.values { sqlite3_finalize(statement) }
            statements.removeAll(keepingCapacity: true)
        }
        var statement: OpaquePointer?
        var tail: UnsafePointer<CChar>?
        let status = sql.withCString { text in
            let status = sqlite3_prepare_v3(handle, text, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, &tail)
            // One statement per call: text after the first would be silently ignored.
            if status == SQLITE_OK, let tail, String(cString: tail).contains(where: { !$0.isWhitespace && $0 != ";" }) {
                return SQLITE_MISUSE
            }
            return status
        }
        guard status == SQLITE_OK, let statement else {
            sqlite3_finalize(statement)
            throw failure(status == SQLITE_OK ? SQLITE_MISUSE : status, sql)
        }
        statements[sql] = statement
        return statement
    }

    private func failure(_ status: Int32, _ sql: String) -> SQLiteError {
        let message = status == SQLITE_MISUSE ? "not exactly one statement" : String(cString: sqlite3_errmsg(handle))
        return SQLiteError(status: status, message: "\(message) (in \(sql.prefix(80)))")
    }
}

/// A failure SQLite reported, with its extended result code and message.
struct SQLiteError: Error, CustomStringConvertible {
    let status: Int32
    let message: String

    var isBusy: Bool { status & 0xff == SQLITE_BUSY }
    var description: String { "SQLite error \(status): \(message)" }
}

/// One column's value, copied out of SQLite before the statement steps on.
enum SQLiteValue: Sendable, Equatable {
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
    case null

    /// What kind of value it is, for errors that must not show the value itself.
    var kind: String {
        switch self {
        case .integer: "an integer"
        case .real: "a real"
        case .text: "text"
        case .blob: "a blob"
        case .null: "NULL"
        }
    }

    init(column: Int32, of statement: OpaquePointer) {
        switch sqlite3_column_type(statement, column) {
        case SQLITE_INTEGER: self = .integer(sqlite3_column_int64(statement, column))
        case SQLITE_FLOAT: self = .real(sqlite3_column_double(statement, column))
        case SQLITE_TEXT:
            let count = Int(sqlite3_column_bytes(statement, column))
            self = .text(
                sqlite3_column_text(statement, column).map {
                    String(decoding: UnsafeBufferPointer(start: $0, count: count), as: UTF8.self)
                } ?? "")
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(statement, column))
            self = .blob(
                sqlite3_column_blob(statement, column).map { Array(UnsafeRawBufferPointer(start: $0, count: count)) }
                    ?? [])
        default: self = .null
        }
    }

    /// The value of a bound Swift value; only the kinds the store binds.
    init(binding value: any Encodable) throws {
        switch value {
        case let value as any OptionalBind:
            guard let wrapped = value.wrapped else {
                self = .null
                return
            }
            self = try SQLiteValue(binding: wrapped)
        case let value as String: self = .text(value)
        case let value as Substring: self = .text(String(value))
        case let value as Bool: self = .integer(value ? 1 : 0)
        case let value as Int: self = .integer(Int64(value))
        case let value as Int64: self = .integer(value)
        case let value as Int32: self = .integer(Int64(value))
        case let value as Double: self = .real(value)
        case let value as Data: self = .blob(Array(value))
        case let value as [UInt8]: self = .blob(value)
        default: throw SQLiteError(status: SQLITE_MISMATCH, message: "cannot bind a value of type \(type(of: value))")
        }
    }

    func bind(to statement: OpaquePointer, at index: Int32) -> Int32 {
        switch self {
        case .integer(let value): return sqlite3_bind_int64(statement, index, value)
        case .real(let value): return sqlite3_bind_double(statement, index, value)
        case .text(let value):
            // withCString, not withUTF8: an empty string must bind as text, never as a null pointer (NULL).
            return value.withCString { xign_sqlite3_bind_text(statement, index, $0, Int32(value.utf8.count)) }
        case .blob(let value) where value.isEmpty: return sqlite3_bind_zeroblob(statement, index, 0)
        case .blob(let value):
            return value.withUnsafeBytes { xign_sqlite3_bind_blob(statement, index, $0.baseAddress, Int32($0.count)) }
        case .null: return sqlite3_bind_null(statement, index)
        }
    }
}
