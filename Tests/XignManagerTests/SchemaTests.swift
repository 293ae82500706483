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
}
