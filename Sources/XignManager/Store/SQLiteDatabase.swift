import Logging
import NIOCore
import NIOPosix
import SQLKit

/// SQLKit's view of a `SQLiteConnection`, so one `ManagerStore` serves SQLite and PostgreSQL alike.
struct SQLiteDatabase: SQLDatabase {
    let connection: SQLiteConnection
    let logger: Logger

    var eventLoop: any EventLoop { MultiThreadedEventLoopGroup.singleton.any() }
    var dialect: any SQLDialect { SQLiteDialect() }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) async throws {
        let (sql, binds) = serialize(query)
        try await connection.execute(sql, binds: binds) { onRow($0) }
    }

    func execute(
        sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void
    ) -> EventLoopFuture<Void> {
        eventLoop.makeFutureWithTask { try await self.execute(sql: query, onRow) }
    }
}

/// SQLite's SQL as the store writes it: `?N` binds, double-quoted names, upserts and RETURNING (SQLite 3.35 and
/// later; Debian 12 has 3.40).
struct SQLiteDialect: SQLDialect {
    var name: String { "sqlite" }
    var identifierQuote: any SQLExpression { SQLRaw("\"") }
    var literalStringQuote: any SQLExpression { SQLRaw("'") }
    func bindPlaceholder(at position: Int) -> any SQLExpression { SQLRaw("?\(position)") }
    func literalBoolean(_ value: Bool) -> any SQLExpression { SQLRaw(value ? "TRUE" : "FALSE") }
    var literalDefault: any SQLExpression { SQLLiteral.null }
    var supportsAutoIncrement: Bool { false }
    var autoIncrementClause: any SQLExpression { SQLRaw("AUTOINCREMENT") }
    var upsertSyntax: SQLUpsertSyntax { .standard }
    var supportsReturning: Bool { true }
}

/// One result row, its values copied out of SQLite.
struct SQLiteRow: SQLRow, Sendable {
    let columns: [String]
    let values: [SQLiteValue]

    var allColumns: [String] { columns }

    func contains(column: String) -> Bool { columns.contains(column) }

    func decodeNil(column: String) throws -> Bool { try value(column) == .null }

    func decode<D: Decodable>(column: String, as type: D.Type) throws -> D {
        try D(from: SQLiteValueDecoder(value: try value(column), column: column))
    }

    private func value(_ column: String) throws -> SQLiteValue {
        guard let index = columns.firstIndex(of: column) else {
            throw DecodingError.keyNotFound(
                SQLiteValueDecoder.Key(column),
                .init(codingPath: [], debugDescription: "the result has no column \(column)"))
        }
        return values[index]
    }
}

/// Decodes one column's value as the plain value the store asks for: text, integers, reals, booleans, or nil.
private struct SQLiteValueDecoder: Decoder, SingleValueDecodingContainer {
    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ name: String) { stringValue = name }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    let value: SQLiteValue
    let column: String

    var codingPath: [any CodingKey] { [Key(column)] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func container<K: CodingKey>(keyedBy type: K.Type) throws -> KeyedDecodingContainer<K> {
        throw mismatch(type, "a structure")
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { throw mismatch([Any].self, "a list") }

    func decodeNil() -> Bool { value == .null }

    func decode(_ type: String.Type) throws -> String {
        guard case .text(let text) = value else { throw mismatch(type) }
        return text
    }

    func decode(_ type: Bool.Type) throws -> Bool {
        guard case .integer(let number) = value, number == 0 || number == 1 else { throw mismatch(type) }
        return number == 1
    }

    func decode(_ type: Double.Type) throws -> Double {
        switch value {
        case .real(let number): return number
        case .integer(let number): return Double(number)
        default: throw mismatch(type)
        }
    }

    func decode(_ type: Float.Type) throws -> Float { Float(try decode(Double.self)) }
    func decode(_ type: Int.Type) throws -> Int { try integer(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T { try T(from: self) }

    private func integer<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        guard case .integer(let number) = value, let exact = T(exactly: number) else { throw mismatch(type) }
        return exact
    }

    private func mismatch(_ type: Any.Type, _ wanted: String? = nil) -> DecodingError {
        .typeMismatch(
            type,
            .init(
                codingPath: codingPath,
                debugDescription: "the column \(column) holds \(value.kind), not \(wanted ?? "\(type)")"))
    }
}
