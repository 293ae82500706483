import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOSSL
import PostgresKit
import PostgresNIO
import XignManagerConfiguration
import XignProtocol

extension Database {
    /// Connects, then migrates under a transaction-scoped advisory lock, so instances that start together migrate once.
    static func openPostgreSQL(_ settings: ManagerConfiguration.PostgreSQL, logger: Logger) async throws -> Database {
        let statements = StatementCounter()
        let pool = try PostgreSQLPool(settings, statements: statements, logger: logger)
        let database = Database(backend: .postgreSQL(pool), logger: logger, statements: statements)
        do {
            try await pool.probe(logger: logger)
            try await pool.withLease { connection in
                // READ COMMITTED, so the statements after the lock see what an instance that migrated first committed.
                try await Database.inTransaction(connection.sql(), begin: "BEGIN", logger: logger) { store in
                    try await store.sql.raw("SELECT pg_advisory_xact_lock(\(bind: PostgreSQLPool.migrationLock))").run()
                    try await Schema.migrate(store.sql)
                }
            }
        } catch {
            await pool.close()
            throw PostgreSQLPool.explained(error, settings: settings)
        }
        return database
    }
}

/// PostgresNIO's connection pool, with a bound on the wait for a connection and serializable transactions.
final class PostgreSQLPool: Sendable {
    static let migrationLock = 0x7869_676E  // "xign"
    /// How long a request waits for a free connection before the manager answers 503.
    static let leaseTimeout: Duration = .seconds(5)
    /// How often a transaction runs again after a serialization conflict before the request fails.
    static let maximumAttempts = 40

    private let client: PostgresClient
    private let runner: Task<Void, Never>
    private let settings: ManagerConfiguration.PostgreSQL
    private let password: String?
    private let tlsConfiguration: TLSConfiguration?
    let statements: StatementCounter

    init(_ settings: ManagerConfiguration.PostgreSQL, statements: StatementCounter, logger: Logger) throws {
        self.settings = settings
        self.statements = statements
        password = try settings.passwordFile.map(Self.readPassword)
        if settings.requiresTLS {
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.certificateVerification = .fullVerification
            if let caFile = settings.caFile { configuration.trustRoots = .file(caFile) }
            tlsConfiguration = configuration
        } else {
            tlsConfiguration = nil
        }
        var configuration = PostgresClient.Configuration(
            host: settings.host, port: settings.port, username: settings.user, password: password,
            database: settings.database,
            tls: tlsConfiguration.map { .require($0) } ?? .disable
        )
        configuration.options.maximumConnections = settings.poolSize
        configuration.options.connectTimeout = .seconds(5)
        // The server ends a statement or an abandoned transaction that hangs, so no pool slot is held forever.
        configuration.options.additionalStartupParameters = [
            ("statement_timeout", "15000"), ("idle_in_transaction_session_timeout", "30000"),
            ("application_name", "xign-manager"),
        ]
        client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        // The pool's own work (making connections, handing them on) runs on an event loop: on the shared concurrency
        // threads it waited whenever all of them were busy, and a lease that needed a new connection ran out meanwhile.
        let executor = EventLoopTaskExecutor(PostgresConnection.defaultEventLoopGroup.any())
        runner = Task(executorPreference: executor) { [client] in await client.run() }
    }

    func close() async {
        runner.cancel()
        await runner.value
    }

    /// One connection made directly, so that a wrong address, password or certificate is reported at start with
    /// its reason; the pool itself only retries and logs.
    func probe(logger: Logger) async throws {
        try await connect(logger: logger).close()
    }

    /// A connection of its own, outside the pool.
    private func connect(logger: Logger) async throws -> PostgresConnection {
        let tls =
            try tlsConfiguration.map {
                PostgresConnection.Configuration.TLS.require(try NIOSSLContext(configuration: $0))
            } ?? .disable
        var configuration = PostgresConnection.Configuration(
            host: settings.host, port: settings.port, username: settings.user, password: password,
            database: settings.database, tls: tls
        )
        configuration.options.connectTimeout = .seconds(5)
        return try await PostgresConnection.connect(
            on: PostgresConnection.defaultEventLoopGroup.any(), configuration: configuration, id: 0, logger: logger
        ).get()
    }

    /// The channel on which instances tell each other which waits to wake; a payload is keys, one per line.
    static let wakeChannel = "xign_wake"

    /// Sends `keys` to every listening instance (this one included), in one statement.
    func publish(_ keys: [String]) async throws {
        try await withLease { [statements] connection in
            try await statements.counting(connection.sql()).raw(
                "SELECT pg_notify(\(bind: Self.wakeChannel), \(bind: keys.joined(separator: "\n")))"
            ).run()
        }
    }

    /// Hands every key the instances publish to `wake`, until cancelled, on a connection of its own that is made
    /// again (after 1 s, doubling to 30 s) whenever it breaks. What is published while it is down, the sweep finds.
    func listen(logger: Logger, wake: @escaping @Sendable (String) -> Void) async {
        var pause: Duration = .seconds(1)
        while !Task.isCancelled {
            do {
                let connection = try await connect(logger: logger)
                statements.add()
                pause = .seconds(1)
                do {
                    try await connection.listen(on: Self.wakeChannel) { notifications in
                        for try await notification in notifications {
                            notification.payload.split(separator: "\n").forEach { wake(String($0)) }
                        }
                    }
                } catch {
                    try? await connection.close()
                    throw error
                }
                try? await connection.close()
            } catch  where !Task.isCancelled {
                logger.warning(
                    "cannot listen for the other instances' changes; retrying in \(pause) (the sweep finds them meanwhile): \(error)"
                )
                try? await Task.sleep(for: pause)
                pause = min(pause * 2, .seconds(30))
            } catch {
                return
            }
        }
    }

    /// Runs `body` on a pooled connection; waits at most `leaseTimeout` for one, or what is left of the request's
    /// budget. `body` itself ends within `workLimit` (or that budget): a server that vanished without closing the
    /// connection (a power cut, a stopped process) would otherwise hold the request until TCP gives up, minutes later.
    func withLease<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        let leased = NIOLockedValueBox(false)
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { [client] in
                try await client.withConnection { connection in
                    leased.withLockedValue { $0 = true }
                    return try await Self.watched(connection, body)
                }
            }
            group.addTask {
                try await Task.sleep(for: RequestBudget.limit(Self.leaseTimeout))
                guard leased.withLockedValue({ $0 }) else {
                    throw ManagerError(
                        .serviceUnavailable, .busy, "the database gave no connection in time; try again in a moment")
                }
                return nil
            }
            while let next = try await group.next() {
                if let result = next {
                    group.cancelAll()
                    return result
                }
            }
            throw CancellationError()
        }
    }

    /// `body`'s one statement in a transaction of its own (autocommit, READ COMMITTED): no conflict to run again.
    func autocommit<T: Sendable>(
        logger: Logger, _ body: @escaping @Sendable (ManagerStore) async throws -> T
    ) async throws -> T {
        try await onLeasedConnection(logger: logger) { try await body(ManagerStore(sql: $0)) }
    }

    /// `body` with a pooled connection's counted SQL, on that connection's event loop (`EventLoopTaskExecutor`).
    private func onLeasedConnection<T: Sendable>(
        logger: Logger, _ body: @escaping @Sendable (any SQLDatabase) async throws -> T
    ) async throws -> T {
        try await withLease { connection in
            try await withTaskExecutorPreference(EventLoopTaskExecutor(connection.eventLoop)) {
                try await body(self.statements.counting(PostgreSQLDatabase(connection: connection, logger: logger)))
            }
        }
    }

    /// Above the server's statement_timeout (15 s), which ends a slow statement itself.
    static let workLimit: Duration = .seconds(20)

    /// `body` on `connection`, which is closed (failing what runs on it; the pool makes a new one) when `body` is not
    /// done within `workLimit` or what is left of the request's budget. A call that still has not ended a second later
    /// is left to itself and answered 503: in failover tests one call in a few hundred never ended once its connection
    /// closed, and it held its activation's PIN checks behind it.
    private static func watched<T: Sendable>(
        _ connection: PostgresConnection, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        // At least a second, so that a call begun as the budget runs out is not cut before it starts.
        let limit = max(RequestBudget.limit(workLimit), .seconds(1))
        let outcome = FirstOutcome<T>()
        return try await withCheckedThrowingContinuation { continuation in
            outcome.await(continuation)
            let watchdog = Task {
                try await Task.sleep(for: limit)
                try? await connection.close()
                try await Task.sleep(for: .seconds(1))
                if outcome.finish(.failure(noAnswerInTime)) {
                    Logger(label: "xign-manager").error(
                        "a database call did not end within \(limit) nor when its connection was closed; left behind")
                }
            }
            Task {
                let result: Result<T, any Error>
                do { result = .success(try await body(connection)) } catch { result = .failure(error) }
                watchdog.cancel()
                outcome.finish(result)
            }
        }
    }

    /// One SERIALIZABLE transaction, run again (after a short random pause) when PostgreSQL reports a conflict.
    func serializableTransaction<T: Sendable>(
        _ durability: Database.Durability, logger: Logger,
        _ body: @escaping @Sendable (ManagerStore) async throws -> T
    ) async throws -> T {
        var attempt = 1
        while true {
            do {
                return try await onLeasedConnection(logger: logger) { sql in
                    try await Database.inTransaction(
                        sql, begin: "BEGIN ISOLATION LEVEL SERIALIZABLE", durability: durability, logger: logger, body)
                }
            } catch let error as PSQLError where Self.isConflict(error) {
                guard attempt < Self.maximumAttempts else {
                    logger.warning(
                        "a transaction met a serialization conflict \(attempt) times in a row; answered busy")
                    throw Self.tooManyConflicts
                }
                attempt += 1
                try await Task.sleep(for: .milliseconds(Int.random(in: 1...min(50, 2 * attempt))))
            }
        }
    }

    /// What a request gets when its transaction lost every attempt to concurrent ones: nothing was written, and the
    /// same request a moment later normally succeeds.
    static let tooManyConflicts = ManagerError(
        .serviceUnavailable, .busy,
        "the database is busy with changes that conflict with this request; nothing was changed, try again in a moment")

    /// What a request gets while PostgreSQL has no primary this manager reaches: the pool makes new connections by
    /// itself, so the same request succeeds once there is one again.
    static let noWritableDatabase = ManagerError(
        .serviceUnavailable, .busy,
        "the manager cannot reach a writable database (it may be failing over to its standby); try again in a moment")

    /// What a request gets when a database call outlived its limit and its connection was closed: the server is gone
    /// without a word, or the database or this machine is overloaded.
    static let noAnswerInTime = ManagerError(
        .serviceUnavailable, .busy,
        "the database did not answer in time (it may be overloaded or failing over to its standby); try again in a moment"
    )

    /// The 503 for an error that is the database's state, not the request's; nil for any other. A connection this
    /// manager closed was closed by a call's watchdog (`watched`): too slow. A broken connection, or a server that
    /// cannot take writes now: class 08 (connection exception), 57P01–57P03 (shut down, crashed, starting up or in
    /// recovery), 25006 (a standby not yet promoted).
    static func unavailable(_ error: PSQLError) -> ManagerError? {
        if error.code == .clientClosedConnection { return noAnswerInTime }
        if [.serverClosedConnection, .connectionError, .uncleanShutdown].contains(error.code) {
            return noWritableDatabase
        }
        guard let state = error.serverInfo?[.sqlState] else { return nil }
        return state.hasPrefix("08") || ["57P01", "57P02", "57P03", "25006"].contains(state) ? noWritableDatabase : nil
    }

    /// Serialization failure or deadlock: the transaction did nothing and may simply run again.
    static func isConflict(_ error: PSQLError) -> Bool {
        ["40001", "40P01"].contains(error.serverInfo?[.sqlState] ?? "")
    }

    /// The password file: one line, not readable by everyone.
    static func readPassword(_ path: String) throws -> String {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw ConfigFile.ParseError(
                description: "storage.password_file \(path) cannot be read: \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & 0o007 == 0 else {
            throw ConfigFile.ParseError(
                description: "storage.password_file \(path) is readable by every user; chmod 0600 it")
        }
        guard info.st_size <= 1024, let data = FileManager.default.contents(atPath: path) else {
            throw ConfigFile.ParseError(
                description: "storage.password_file \(path) is not a readable file of at most 1 KiB")
        }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .newlines)
    }

    /// What went wrong opening the database, in words that say what to check.
    static func explained(_ error: any Error, settings: ManagerConfiguration.PostgreSQL) -> any Error {
        guard let error = error as? PSQLError else { return error }
        let target =
            "PostgreSQL at \(settings.host):\(settings.port) (database \(settings.database), user \(settings.user))"
        switch error.serverInfo?[.sqlState] {
        case "28P01", "28000"?:
            return ManagerError.internalFailure(
                "\(target) refused the login: check the user in storage.url and the password in storage.password_file")
        case "3D000"?:
            return ManagerError.internalFailure(
                "\(target): the database does not exist; create it (createdb -O \(settings.user) \(settings.database))")
        case let state?:
            return ManagerError.internalFailure(
                "\(target) answered \(state): \(error.serverInfo?[.message] ?? "no message")")
        case nil:
            return ManagerError.internalFailure(
                "cannot reach \(target): \(String(reflecting: error.code)); check storage.url, the server, and sslmode/storage.ca_file"
            )
        }
    }
}

/// The first of two ends of a call (its own, or its watchdog's) resumes the waiting caller; the other is dropped.
private final class FirstOutcome<T: Sendable>: Sendable {
    private let state = NIOLockedValueBox<(continuation: CheckedContinuation<T, any Error>?, done: Bool)>((nil, false))

    func await(_ continuation: CheckedContinuation<T, any Error>) {
        state.withLockedValue { $0.continuation = continuation }
    }

    /// Resumes the caller with `result` unless it was resumed already; true when this call did.
    @discardableResult
    func finish(_ result: Result<T, any Error>) -> Bool {
        let continuation = state.withLockedValue { state -> CheckedContinuation<T, any Error>? in
            guard !state.done else { return nil }
            state.done = true
            return state.continuation
        }
        continuation?.resume(with: result)
        return continuation != nil
    }
}
