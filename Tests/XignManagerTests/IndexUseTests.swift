import Foundation
import Testing
import XignTestSupport

@testable import XignManager

/// Every statement a login (and a registration) sends to PostgreSQL finds its rows through an index, so a login costs the same at a
/// million accounts as at a thousand (`make bench-scale` measures it). Each statement is planned as the manager runs
/// it, a generic plan over parameters, with sequential scans priced out: a plan that still scans a table has no
/// index to use. Control: the same check finds the scan of a statement written without one.
@Suite(.machineShare) struct IndexUseTests {
    @Test func everyStatementOfALoginAndARegistrationUsesAnIndex() async throws {
        try await InProcessManager.run(database: .postgreSQL) { inProcess in
            let database = try #require(inProcess.files.postgreSQLDatabase)
            let device = try await inProcess.api.enrolDevice("indexed@example.org")
            var statuses: [Int] = []
            let login = try await inProcess.manager.database.statements.recordingTexts {
                for pin in ["24680", "13579"] {
                    statuses.append(try await inProcess.api.authenticate(device, pin: pin).status)
                }
                statuses.append(try await inProcess.api.postRegistration("another@example.org").status)
            }
            #expect(statuses == [200, 200, 201], "a login, a wrong PIN and a registration")
            // The statements that read or write rows; not BEGIN, SET LOCAL or COMMIT.
            let statements = Set(login).filter { sql in
                ["SELECT", "INSERT", "UPDATE", "DELETE"].contains(sql.drop { $0.isWhitespace }.prefix(6).uppercased())
            }
            #expect(statements.count >= 8, "\(statements)")
            for sql in statements {
                let scans = try Self.sequentialScans(sql, database: database)
                #expect(scans.isEmpty, "\(scans) in: \(sql.prefix(300))")
            }
            let control = try Self.sequentialScans(
                "SELECT id FROM accounts WHERE display_name_for_test_only(email) = $1", database: database,
                defining:
                    "CREATE OR REPLACE FUNCTION display_name_for_test_only(text) RETURNS text IMMUTABLE LANGUAGE sql AS 'SELECT lower($1)'"
            )
            #expect(control == ["accounts"], "control: a predicate no index serves is found")
        }
    }

    @Test func everyStatementOfAListPageUsesAnIndex() async throws {
        try await InProcessManager.run(database: .postgreSQL) { inProcess in
            let database = try #require(inProcess.files.postgreSQLDatabase)
            _ = try await inProcess.api.enrolDevice("listed@example.org")
            let page = try ListPage(after: "k", limit: 10)
            let statements = try await inProcess.manager.database.statements.recordingTexts {
                _ = try await inProcess.manager.administration.accounts(page)
                _ = try await inProcess.manager.administration.hosts(page)
                _ = try await inProcess.manager.consoleAccounts(matching: "", page: page)
            }.filter { sql in
                // The administrator's mapping of host groups to local groups is a handful of rows, read whole.
                sql.drop { $0.isWhitespace }.prefix(6).uppercased() == "SELECT"
                    && !sql.contains("FROM host_group_local_groups")
            }
            #expect(statements.count >= 4, "\(statements)")
            for sql in Set(statements) {
                let scans = try Self.sequentialScans(sql, database: database)
                #expect(scans.isEmpty, "\(scans) in: \(sql.prefix(300))")
            }
        }
    }

    /// The tables a generic plan of `sql` reads sequentially, with sequential scans priced out.
    static func sequentialScans(_ sql: String, database: String, defining setup: String? = nil) throws -> [String] {
        let parameters = Set(sql.matches(of: /\$([0-9]+)/).compactMap { Int($0.1) }).max() ?? 0
        let arguments =
            parameters == 0 ? "" : "(" + Array(repeating: "NULL", count: parameters).joined(separator: ", ") + ")"
        let script = [
            setup.map { $0 + ";" } ?? "",
            "SET enable_seqscan = off;", "SET plan_cache_mode = force_generic_plan;",
            "PREPARE probe AS \(sql);", "EXPLAIN (FORMAT JSON) EXECUTE probe\(arguments);",
        ].joined(separator: "\n")
        let plan = try PostgreSQLServer.shared().query(script, database: database)
        let json = try JSONSerialization.jsonObject(with: Data(plan.utf8))
        var tables: [String] = []
        func walk(_ node: Any) {
            if let node = node as? [String: Any] {
                if node["Node Type"] as? String == "Seq Scan", let table = node["Relation Name"] as? String {
                    tables.append(table)
                }
                node.values.forEach(walk)
            } else if let nodes = node as? [Any] {
                nodes.forEach(walk)
            }
        }
        walk(json)
        return tables
    }
}
