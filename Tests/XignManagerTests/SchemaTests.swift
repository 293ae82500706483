import Foundation
import Testing
import XignProtocol
import XignTestSupport

@testable import XignManager

/// A manager upgraded while logins are in flight: each step of the schema keeps what rows meant before it.
@Suite struct SchemaTests {
    /// Step 11 folds the service name and the two optional ids into one purpose; every kind of pending
    /// authentication comes out as the purpose it stood for, and the old columns are gone.
    @Test func authenticationsInFlightKeepTheirPurpose() throws {
        let directory = TemporaryDirectory()
        let database = directory.file("manager.sqlite")
        func sqlite(_ statements: [String]) throws -> String {
            let script = try directory.write("script.sql", statements.map { $0 + ";\n" }.joined())
            let result = try ChildProcess("/usr/bin/sqlite3", ["-bail", database, ".read \(script)"], in: directory)
                .wait()
            guard result.status == 0 else { throw TestFailure("sqlite3: \(result.stderr)") }
            return result.stdout
        }
        let step = Schema.migrations.firstIndex { $0 == Schema.authenticationPurposes }!
        _ = try sqlite(Schema.migrations[..<step].flatMap { $0 })
        let rows = [
            ("a1", "'pam'", "NULL", "NULL"), ("a2", "'merge'", "'S1'", "NULL"), ("a3", "'confirm'", "NULL", "'C1'"),
            ("a4", "'change-pin'", "NULL", "NULL"), ("a5", "'add-factor'", "NULL", "NULL"),
        ]
        _ = try sqlite(
            rows.map { id, service, merge, confirmation in
                """
                INSERT INTO authentications (id, device_id, activation_id, service, host, local_user, challenge, expires_at, merge_session_id, confirmation_id)
                VALUES ('\(id)', 'd', 'a', \(service), 'h', 'u', 'c', 1, \(merge), \(confirmation))
                """
            })
        _ = try sqlite(Schema.authenticationPurposes)
        let purposes = try sqlite(["SELECT purpose FROM authentications ORDER BY id"]).split(separator: "\n").map {
            try JSONDecoder().decode(AuthenticationPurpose.self, from: Data($0.utf8))
        }
        #expect(
            purposes == [
                .login(service: "pam"), .merge(sessionId: "S1"), .confirmation(id: "C1"),
                .apiAccess(process: .changePin),
                .apiAccess(process: .addFactor),
            ])
        let columns = try sqlite(["SELECT name FROM pragma_table_info('authentications')"])
        #expect(
            !columns.contains("service") && !columns.contains("merge_session_id") && columns.contains("purpose"),
            "\(columns)")
    }

    /// The step that brings uids numbers the accounts that had a login name, oldest first, and the counter goes on
    /// after them; a manager without such accounts starts at the range it is configured with (the counter is 0).
    @Test func accountsWithALoginNameGetNumbersInTheOrderTheyWereMade() throws {
        let directory = TemporaryDirectory()
        func sqlite(_ database: String, _ statements: [String]) throws -> String {
            let script = try directory.write("script.sql", statements.map { $0 + ";\n" }.joined())
            let result = try ChildProcess(
                "/usr/bin/sqlite3", ["-bail", directory.file(database), ".read \(script)"], in: directory
            ).wait()
            guard result.status == 0 else { throw TestFailure("sqlite3: \(result.stderr)") }
            return result.stdout
        }
        let step = Schema.migrations.firstIndex { $0 == Schema.unixIds }!
        for database in ["upgraded.sqlite", "empty.sqlite"] {
            _ = try sqlite(database, Schema.migrations[..<step].flatMap { $0 })
        }
        _ = try sqlite(
            "upgraded.sqlite",
            [("young", "'young'", 2), ("old", "'old'", 1), ("nameless", "NULL", 0)].map { id, login, created in
                "INSERT INTO accounts (id, email, login_name, attributes, is_temporary, created_at) VALUES ('\(id)', '\(id)@example.org', \(login), '{}', 0, \(created))"
            })
        for database in ["upgraded.sqlite", "empty.sqlite"] { _ = try sqlite(database, Schema.unixIds) }
        #expect(
            try sqlite("upgraded.sqlite", ["SELECT id || '=' || COALESCE(uid, '-') FROM accounts ORDER BY id"])
                == "nameless=-\nold=1879048192\nyoung=1879048193\n")
        #expect(try sqlite("upgraded.sqlite", ["SELECT next_id FROM unix_id_counter"]) == "1879048194\n")
        #expect(try sqlite("empty.sqlite", ["SELECT next_id FROM unix_id_counter"]) == "0\n")
    }
}
