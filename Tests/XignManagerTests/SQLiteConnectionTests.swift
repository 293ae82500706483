import Foundation
import Logging
import SQLKit
import Synchronization
import Testing
import XignTestSupport

@testable import XignManager

/// The manager's own SQLite binding: values go in and come out as the store binds and decodes them, statements are
/// kept and prepared again when they must be, and a file another process holds is waited for, not failed.
@Suite struct SQLiteConnectionTests {
    static func connection(in directory: TemporaryDirectory) throws -> (SQLiteConnection, any SQLDatabase) {
        let connection = try SQLiteConnection(path: directory.file("test.sqlite"), counter: StatementCounter())
        return (connection, SQLiteDatabase(connection: connection, logger: Logger(label: "test")))
    }

    @Test func valuesComeBackAsTheyWereBound() async throws {
        let directory = TemporaryDirectory()
        let (_, sql) = try Self.connection(in: directory)
        try await sql.raw("CREATE TABLE t (id INTEGER, text TEXT, maybe TEXT, flag INTEGER, real REAL)").run()
        let none: String? = nil
        try await sql.raw(
            "INSERT INTO t VALUES (\(bind: Int.min), \(bind: ""), \(bind: none), \(bind: true), \(bind: 0.5))"
        ).run()
        try await sql.raw(
            "INSERT INTO t VALUES (\(bind: Int.max), \(bind: "ü\u{0}x"), \(bind: Optional("set")), \(bind: false), \(bind: -2.0))"
        )
        .run()
        let rows = try await sql.raw("SELECT * FROM t ORDER BY id").all()
        #expect(try rows.map { try $0.decode(column: "id", as: Int.self) } == [Int.min, Int.max])
        #expect(
            try rows.map { try $0.decode(column: "text", as: String.self) } == ["", "ü\u{0}x"],
            "an empty string is text, not NULL")
        #expect(try rows.map { try $0.decode(column: "maybe", as: String?.self) } == [nil, "set"])
        #expect(try rows.map { try $0.decode(column: "flag", as: Bool.self) } == [true, false])
        #expect(try rows.map { try $0.decode(column: "real", as: Double.self) } == [0.5, -2.0])
        #expect(try rows[0].decodeNil(column: "maybe") && !(try rows[0].decodeNil(column: "text")))
    }

    /// A column of another kind than asked is an error that names the column, never its value (a PIN verifier, say).
    @Test func aWrongKindNamesTheColumnButNotTheValue() async throws {
        let directory = TemporaryDirectory()
        let (_, sql) = try Self.connection(in: directory)
        let row = try #require(try await sql.raw("SELECT 'verifier-secret' AS pin_verifier").first())
        #expect(try row.decode(column: "pin_verifier", as: String.self) == "verifier-secret")
        let error = #expect(throws: DecodingError.self) { try row.decode(column: "pin_verifier", as: Int.self) }
        let text = String(describing: error)
        #expect(text.contains("pin_verifier") && !text.contains("verifier-secret"))
        #expect(throws: DecodingError.self) { try row.decode(column: "missing", as: String.self) }
    }

    /// One statement per call: a second one in the text would otherwise be dropped without a word.
    @Test func moreThanOneStatementIsRefused() async throws {
        let directory = TemporaryDirectory()
        let (_, sql) = try Self.connection(in: directory)
        await #expect(throws: SQLiteError.self) { try await sql.raw("CREATE TABLE a (x); CREATE TABLE b (x)").run() }
        try await sql.raw("CREATE TABLE a (x);  ").run()
        #expect(
            try await sql.raw("SELECT count(*) AS n FROM sqlite_schema").first()?.decode(column: "n", as: Int.self) == 1
        )
    }

    /// Kept statements see a schema change, and more distinct statements than the cache keeps still run.
    @Test func keptStatementsFollowTheSchemaAndTheCacheLimit() async throws {
        let directory = TemporaryDirectory()
        let (_, sql) = try Self.connection(in: directory)
        try await sql.raw("CREATE TABLE t (a INTEGER)").run()
        try await sql.raw("INSERT INTO t VALUES (1)").run()
        #expect(try await sql.raw("SELECT * FROM t").first()?.allColumns == ["a"])
        try await sql.raw("ALTER TABLE t ADD COLUMN b TEXT DEFAULT 'x'").run()
        #expect(try await sql.raw("SELECT * FROM t").first()?.allColumns == ["a", "b"])
        for n in 0...(SQLiteConnection.statementCacheLimit + 10) {
            let value = try await sql.raw(SQLQueryString(String("SELECT \(n) AS n"))).first()?.decode(
                column: "n", as: Int.self)
            #expect(value == n)
        }
        #expect(try await sql.raw("SELECT * FROM t").first()?.decode(column: "b", as: String.self) == "x")
    }

    /// Another process (an admin command) holds the write lock: the manager's write waits for it, on the thread pool,
    /// and goes through once it is given back; reads meanwhile are answered. The control: a lock held past the busy
    /// timeout fails the write with SQLite's "database is locked". The holder gives the lock back when the test says
    /// so, never on a clock, so a slow machine cannot reorder the steps. The steps while the lock is held must take less
    /// than the busy timeout (5 s), so the test and its write run on a thread of their own: on the shared threads, a
    /// full `make test` once starved them past that (at 8da1aed, in a same-run timing).
    @Test(.machineShare) func aWriteWaitsForAnotherProcessThatHoldsTheFile() async throws {
        let (directory, _, database) = try await DurabilityTests.temporaryDatabase()
        let file = directory.file("manager.sqlite")
        /// A sqlite3 process that holds the write lock until `release` is called; returned once it holds it.
        func holdLock(_ name: String) async throws -> (holder: ChildProcess, release: () throws -> Void) {
            let held = directory.file("\(name)-held")
            let released = directory.file("\(name)-released")
            let holder = try ChildProcess(
                "/usr/bin/sqlite3", [file],
                stdin: "BEGIN IMMEDIATE;\n.shell touch \(held)\n"
                    + ".shell while [ ! -e \(released) ]; do sleep 0.05; done\nCOMMIT;\n",
                in: directory)
            for _ in 0..<6000 where !FileManager.default.fileExists(atPath: held) && holder.poll() == nil {
                try await Task.sleep(for: .milliseconds(10))
            }
            try #require(FileManager.default.fileExists(atPath: held), "sqlite3 took the write lock")
            return (holder, { try Data().write(to: URL(fileURLWithPath: released)) })
        }
        let written = Atomic<Bool>(false)
        let insert = { @Sendable (key: String) in
            try await database.transaction { store in
                try await store.sql.raw(
                    "INSERT INTO rate_limits (key, window_start, count) VALUES (\(bind: key), 0, 1)"
                ).run()
            }
            written.store(true, ordering: .sequentiallyConsistent)
        }
        let lock = try await holdLock("first")
        let sent = database.statements.total
        // A child task, so it runs on this test's own thread too: a `Task` went to the shared threads, where a full
        // `make test` once kept it from starting for a minute.
        async let writing: Void = insert("after-the-lock")
        // BEGIN IMMEDIATE found the file locked and runs again on the thread pool, where it waits: each try counts.
        for _ in 0..<6000 where database.statements.total < sent + 2 { try await Task.sleep(for: .milliseconds(10)) }
        try #require(database.statements.total >= sent + 2, "the write tried to take the lock")
        for _ in 0..<3 {
            _ = try await database.read { try await $0.sql.raw("SELECT count(*) AS n FROM rate_limits").first() }
        }
        let writtenWhileHeld = written.load(ordering: .sequentiallyConsistent)
        #expect(
            !writtenWhileHeld,
            "the write waits while the other process holds the lock, and reads are answered meanwhile")
        #expect(lock.holder.poll() == nil, "the other process still holds the lock after the reads")
        try lock.release()
        try await writing
        #expect(try lock.holder.wait().status == 0)

        let longLock = try await holdLock("long")
        let error = await #expect(throws: SQLiteError.self) { try await insert("while-locked") }
        #expect(error?.isBusy == true && "\(error.map(String.init(describing:)) ?? "")".contains("locked"))
        try longLock.release()
        #expect(try longLock.holder.wait().status == 0)
        try await insert("once-free")
        await database.close()
    }
}
