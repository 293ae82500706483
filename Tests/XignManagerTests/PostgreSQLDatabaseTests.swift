import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import NIOPosix
import SQLKit
import Testing
import XignTestSupport

@testable import XignManager
@testable import XignManagerConfiguration

/// The manager's PostgreSQL view: a statement is prepared once per connection and then only bound and executed, its
/// values come back as bound, and a prepared statement keeps working when another instance adds a column.
@Suite struct PostgreSQLDatabaseTests {
    /// A manager database of its own on the shared cluster, through one pooled connection, so every transaction of a
    /// test meets the statements the earlier ones prepared.
    static func database() async throws -> (PostgreSQLServer, String, Database) {
        let cluster = try PostgreSQLServer.shared()
        let (name, _) = try cluster.makeDatabase()
        var configuration = ManagerConfiguration()
        configuration.postgreSQL = ManagerConfiguration.PostgreSQL(
            host: "127.0.0.1", port: cluster.port, user: "xign", database: name, passwordFile: cluster.passwordFile,
            requiresTLS: false,
            caFile: nil, poolSize: 1)
        return (cluster, name, try await Database.open(configuration, logger: Logger(label: "test")))
    }

    /// How many statements this connection has prepared whose text contains `marker`.
    static func prepared(_ marker: String, in store: ManagerStore) async throws -> Int {
        try await store.sql.raw(
            "SELECT count(*) AS n FROM pg_prepared_statements WHERE strpos(statement, \(bind: marker)) > 0"
        )
        .first()?.decode(column: "n", as: Int.self) ?? -1
    }

    @Test func aStatementIsPreparedOncePerConnectionAndForItsTypes() async throws {
        let (_, _, database) = try await Self.database()
        for value in [1, 2, 3] {
            let row = try await database.transaction {
                try await $0.sql.raw("SELECT \(bind: value) + 1 AS once_marker").first()
            }
            #expect(try row?.decode(column: "once_marker", as: Int.self) == value + 1)
        }
        #expect(
            try await database.transaction { try await Self.prepared("once_marker", in: $0) } == 1,
            "three uses, one preparation")
        // The control: the same text with a parameter of another type is a statement of its own, since a prepared
        // statement keeps the types of its first use.
        let row = try await database.transaction {
            try await $0.sql.raw("SELECT \(bind: "a") || 'b' AS once_marker").first()
        }
        #expect(try row?.decode(column: "once_marker", as: String.self) == "ab")
        #expect(try await database.transaction { try await Self.prepared("once_marker", in: $0) } == 2)
        await database.close()
    }

    /// A transaction's statements resume it on its connection's event loop, not on another thread after each answer.
    @Test func aTransactionRunsOnItsConnectionsEventLoop() async throws {
        let (_, _, database) = try await Self.database()
        #expect(
            try await database.transaction { store in
                _ = try await store.sql.raw("SELECT 1 AS one").first()
                return store.sql.eventLoop.inEventLoop
            })
        #expect(
            !MultiThreadedEventLoopGroup.singleton.any().inEventLoop,
            "the control: the test's own task is not on a loop")
        await database.close()
    }

    @Test func valuesComeBackAsTheyWereBound() async throws {
        let (_, _, database) = try await Self.database()
        let none: String? = nil
        let rows = try await database.transaction { store in
            try await store.sql.raw("CREATE TABLE t (id BIGINT, text TEXT, maybe TEXT, real DOUBLE PRECISION)").run()
            // NULL first: the statement prepared for it must not decide the type of a later value.
            for (id, text, maybe, real) in [(Int.min, "", none, 0.5), (Int.max, "ü'x", Optional("set"), -2.0)] {
                try await store.sql.raw(
                    "INSERT INTO t VALUES (\(bind: id), \(bind: text), \(bind: maybe), \(bind: real))"
                ).run()
            }
            return try await store.sql.raw("SELECT * FROM t ORDER BY id").all()
        }
        #expect(try rows.map { try $0.decode(column: "id", as: Int.self) } == [Int.min, Int.max])
        #expect(
            try rows.map { try $0.decode(column: "text", as: String.self) } == ["", "ü'x"],
            "an empty string is text, not NULL")
        #expect(try rows.map { try $0.decode(column: "maybe", as: String?.self) } == [nil, "set"])
        #expect(try rows.map { try $0.decode(column: "real", as: Double.self) } == [0.5, -2.0])
        await database.close()
    }

    /// Another instance's migration adds a column while this one holds prepared statements. PostgreSQL refuses a
    /// prepared `SELECT *` whose result changed (the control), so the store names its columns.
    @Test func aPreparedStatementThatNamesItsColumnsOutlivesANewColumn() async throws {
        let (cluster, name, database) = try await Self.database()
        try await database.transaction { store in
            try await store.sql.raw("CREATE TABLE m (a BIGINT)").run()
            try await store.sql.raw("INSERT INTO m VALUES (\(bind: 7))").run()
        }
        let named = {
            try await database.transaction { try await $0.sql.raw("SELECT a FROM m WHERE a = \(bind: 7)").first() }
        }
        let star = {
            try await database.transaction { try await $0.sql.raw("SELECT * FROM m WHERE a = \(bind: 7)").first() }
        }
        _ = try await (named(), star())
        try cluster.query("ALTER TABLE m ADD COLUMN b BIGINT", database: name)
        #expect(try await named()?.decode(column: "a", as: Int.self) == 7)
        await #expect(throws: (any Error).self, "PostgreSQL: cached plan must not change result type") {
            try await star()
        }
        await database.close()
    }

    /// The store's confirmation queries run prepared against the schema with one more column than this manager knows.
    @Test func theConfirmationQueriesOutliveANewColumn() async throws {
        let (cluster, name, database) = try await Self.database()
        #expect(try await database.read { try await $0.confirmation("none") } == nil)
        #expect(try await database.read { try await $0.pendingConfirmations(accountId: "none", now: 0) }.isEmpty)
        try cluster.query("ALTER TABLE confirmations ADD COLUMN added_by_a_newer_instance TEXT", database: name)
        #expect(try await database.read { try await $0.confirmation("none") } == nil)
        #expect(try await database.read { try await $0.pendingConfirmations(accountId: "none", now: 0) }.isEmpty)
        await database.close()
    }

    /// The pool connects on an event loop, not on the concurrency threads that tests and handlers share: while those are
    /// all blocked for longer than the lease's 5 s wait, a transaction that needs a new connection still gets one.
    /// (With the pool's work on those threads, the connection waited for them and the lease ran out: the test failed so.)
    /// It runs in a test process of its own (Tests/run.sh): the blocked threads stall every other test's requests.
    @Test func aLeaseNeedsNoFreeConcurrencyThread() async throws {
        let (cluster, name, database) = try await Self.database()
        _ = try await database.transaction { try await $0.sql.raw("SELECT 1 AS one").first() }
        // The pool's connection is gone, so the next lease must make one.
        _ = try cluster.query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(name)' AND application_name = 'xign-manager'"
        )
        try await Task.sleep(for: .milliseconds(300))
        // The transaction asks from an event loop, so only the pool's own work needs the blocked threads.
        let loop = EventLoopTaskExecutor(MultiThreadedEventLoopGroup.singleton.any())
        let transaction = Task(executorPreference: loop) {
            try await Task.sleep(for: .milliseconds(300))
            return try await database.transaction { try await $0.sql.raw("SELECT 2 AS two").first() }
        }
        let blockers = (0..<ProcessInfo.processInfo.activeProcessorCount).map { _ in
            Task.detached { usleep(7_000_000) }  // blocks its thread, as a synchronous test or a slow handler would
        }
        for blocker in blockers { await blocker.value }
        #expect(try await transaction.value?.decode(column: "two", as: Int.self) == 2)
        // The control: a lease the pool cannot give (its one connection held) still runs out after 5 s.
        let holding = Task {
            try await database.transaction { try await $0.sql.raw("SELECT pg_sleep(7) IS NULL AS slept").first() }
        }
        try await Task.sleep(for: .milliseconds(300))
        await #expect(throws: ManagerError.self) {
            try await database.transaction { try await $0.sql.raw("SELECT 3 AS three").first() }
        }
        _ = try await holding.value
        await database.close()
    }

    /// A call that outlives a login's 7 s budget has its connection closed by its watchdog, and the request is
    /// answered 503 "did not answer in time", not "cannot reach a writable database": no failover happened. The
    /// control: the same route with a call that fits in the budget answers 200.
    @Test func aCallPastALoginsBudgetIsAnsweredAsTooSlow() async throws {
        let (_, _, database) = try await Self.database()
        let router = Router()
        router.add(middleware: ErrorLoggingMiddleware(logger: Logger(label: "test")))
        router.get("sleep/:seconds") { _, context -> String in
            let seconds = try context.parameters.require("seconds", as: Int.self)
            return try await RequestBudget.within {
                try await database.transaction {
                    try await $0.sql.raw("SELECT pg_sleep(\(bind: seconds)) IS NULL AS slept").first()
                }
                return "slept"
            }
        }
        try await Application(router: router).test(.router) { client in
            try await client.execute(uri: "/sleep/0", method: .get) { #expect($0.status == .ok) }
            let started = ContinuousClock.now
            try await client.execute(uri: "/sleep/12", method: .get) { response in
                #expect(response.status == .serviceUnavailable)
                #expect(String(buffer: response.body).contains("the database did not answer in time"))
            }
            let waited = ContinuousClock.now - started
            #expect(waited >= .seconds(7), "answered after \(waited), before the budget ran out")
        }
        await database.close()
    }
}
