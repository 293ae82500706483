import Logging
import NIOCore
import PostgresKit
import PostgresNIO
import SQLKit
import Synchronization

/// SQLKit's view of one pooled PostgreSQL connection that prepares each statement once per connection and then only
/// binds and executes it. PostgresKit's own view sends every statement unnamed, so PostgreSQL parsed, analysed and
/// planned it again at each use: 40 % of its CPU in a login.
struct PostgreSQLDatabase: SQLDatabase {
    let connection: PostgresConnection
    let logger: Logger

    var eventLoop: any EventLoop { connection.eventLoop }
    var dialect: any SQLDialect { PostgresDialect() }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) async throws {
        let (sql, binds) = serialize(query)
        var bindings = PostgresBindings(capacity: binds.count)
        var types: [UInt32] = []
        for bind in binds { types.append(try Self.append(bind, to: &bindings)) }
        if let name = PreparedStatementNames.shared.name(for: sql, types: types) {
            let rows = try await NamedStatement.$current.withValue(NamedStatement.Text(name: name, sql: sql)) {
                try await connection.execute(NamedStatement(bindings: bindings), logger: logger)
            }
            for try await row in rows { onRow(row.sql()) }
        } else {
            for try await row in try await connection.query(
                PostgresQuery(unsafeSQL: sql, binds: bindings), logger: logger)
            {
                onRow(row.sql())
            }
        }
    }

    func execute(
        sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void
    ) -> EventLoopFuture<Void> {
        eventLoop.makeFutureWithTask { try await self.execute(sql: query, onRow) }
    }

    /// Binds one value as PostgresKit would, for the plain kinds the store binds; returns its type's OID (0 for NULL,
    /// which PostgreSQL infers), which is part of the statement's name because a prepared statement keeps the
    /// parameter types of its first use.
    static func append(_ value: any Encodable, to bindings: inout PostgresBindings) throws -> UInt32 {
        if let optional = value as? any OptionalBind, optional.wrapped == nil {
            bindings.appendNull()
            return 0
        }
        guard let value = value as? any PostgresThrowingDynamicTypeEncodable else {
            throw ManagerError.internalFailure("cannot bind a value of type \(type(of: value)) for PostgreSQL")
        }
        try bindings.append(value, context: .default)
        return value.psqlType.rawValue
    }
}

/// The name each statement text (with its parameter types) is prepared under, the same on every connection. The store
/// has a fixed set of statements; past `limit` names a statement runs unnamed, so nothing grows without bound.
final class PreparedStatementNames: Sendable {
    static let shared = PreparedStatementNames()
    static let limit = 512

    private struct Statement: Hashable {
        let sql: String
        let types: [UInt32]
    }

    private let names = Mutex<[Statement: String]>([:])

    func name(for sql: String, types: [UInt32]) -> String? {
        let key = Statement(sql: sql, types: types)
        return names.withLock { names in
            if let name = names[key] { return name }
            guard names.count < Self.limit else { return nil }
            let name = "xign_\(names.count)"
            names[key] = name
            return name
        }
    }
}

/// PostgresNIO prepares a statement once per connection under its type's static name and SQL. The store's statements
/// are many texts of one type, so the type reads both from the task that executes it (PostgresNIO reads them in the
/// calling task, before it hands the statement to the connection; `PostgreSQLDatabaseTests` checks that they arrive).
private struct NamedStatement: PostgresPreparedStatement {
    struct Text: Sendable {
        var name: String
        var sql: String
    }

    @TaskLocal static var current = Text(name: "", sql: "")
    static var name: String { current.name }
    static var sql: String { current.sql }

    let bindings: PostgresBindings

    func makeBindings() -> PostgresBindings { bindings }
    func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
}
