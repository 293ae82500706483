import SQLKit

/// Every row the manager keeps and every query on them, so the processes above hold no SQL. It is handed out by
/// `Database.transaction` with that transaction's connection; a second backend changes only the store.
public struct ManagerStore: Sendable {
    let sql: any SQLDatabase

    func setting(_ name: String) async throws -> String? {
        try await sql.raw("SELECT value FROM manager_settings WHERE name = \(bind: name)").first()?.decode(
            column: "value", as: String.self)
    }

    func setSetting(_ name: String, to value: String) async throws {
        try await sql.raw(
            """
            INSERT INTO manager_settings (name, value) VALUES (\(bind: name), \(bind: value))
            ON CONFLICT (name) DO UPDATE SET value = excluded.value
            """
        ).run()
    }
}

extension SQLRow {
    /// A column that holds an enum's raw value. A value this manager does not know is an error at the row, never a
    /// guess.
    func decode<Value: RawRepresentable>(enumColumn column: String, as type: Value.Type) throws -> Value
    where Value.RawValue == String {
        let text = try decode(column: column, as: String.self)
        guard let value = Value(rawValue: text) else {
            throw ManagerError.internalFailure(
                "the column \(column) holds '\(text.prefix(20))', which this manager does not know")
        }
        return value
    }
}
