import Foundation
import Testing
import XignTestSupport

/// The manager's connection to PostgreSQL with sslmode=verify-full: the right CA connects, another CA is refused
/// at start with a message that says what to check.
@Suite(.machineShare) struct DatabaseTLSTests {
    @Test func verifyFullConnectsWithTheRightCAAndRefusesAnother() async throws {
        let cluster = try PostgreSQLServer.shared()
        let trusted = try cluster.makeDatabase(tls: cluster.certificates.caFile)
        let manager = try ManagerProcess(config: ManagerProcess.testConfig + "\n" + trusted.config + "\n")
        _ = try await API(manager: manager).register("tls@example.org")
        #expect(
            try cluster.query(
                "SELECT COUNT(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE s.ssl AND a.datname = '\(trusted.name)'"
            )
                != "0",
            "the manager's connections are encrypted")

        let untrusted = try cluster.makeDatabase(tls: cluster.certificates.otherCAFile)
        #expect { try ManagerProcess(config: ManagerProcess.testConfig + "\n" + untrusted.config + "\n") } throws: {
            "\($0)".contains("cannot reach PostgreSQL at 127.0.0.1") && "\($0)".contains("storage.ca_file")
        }
    }

    @Test func aWrongPasswordIsNamedAsSuch() async throws {
        let cluster = try PostgreSQLServer.shared()
        let directory = TemporaryDirectory()
        let wrong = try directory.write("password", "not-it\n")
        let database = try cluster.makeDatabase()
        let config = database.config.replacingOccurrences(of: cluster.passwordFile, with: wrong)
        #expect {
            try ManagerProcess(config: ManagerProcess.testConfig + "\n" + config + "\n", directory: directory)
        } throws: {
            "\($0)".contains(
                "refused the login: check the user in storage.url and the password in storage.password_file")
        }
    }
}
