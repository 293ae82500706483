import SQLKit

/// Every row the manager keeps and every query on them, so the processes above hold no SQL. It is handed out by
/// `Database.transaction` with that transaction's connection; a second backend changes only the store.
public struct ManagerStore: Sendable {
    let sql: any SQLDatabase

    func setting(_ name: String) async throws -> String? {
        try await sql.raw("SELECT value FROM manager_settings WHERE name = \(bind: name)").first()?.decode(column: "value", as: String.self)
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
