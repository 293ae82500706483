import Foundation
import XignProtocol

/// The database a test manager uses: a temporary SQLite file, or a fresh database in the test cluster.
public enum TestDatabase: String, Sendable, CaseIterable {
    case sqlite
    case postgreSQL
}

/// A test manager's files: its temporary directory, manager.conf, data directory and database (a SQLite file, or a
/// fresh database in the test cluster), and what a test reads there: rows, mails, `xign-manager admin`. The manager
/// itself runs as a process (`ManagerProcess`) or inside the test (the manager tests' `InProcessManager`).
public class ManagerFiles: @unchecked Sendable {
    public let directory: TemporaryDirectory
    public let dataDirectory: String
    public let configPath: String
    public let database: TestDatabase
    /// The PostgreSQL database's name, when `database` is `.postgreSQL`.
    public let postgreSQLDatabase: String?

    /// Test settings: short lockout delays so escalation is observable, a cheap PIN hash, rate limits that only the
    /// abuse tests reach; `extraConfig` adds or overrides lines.
    public static let testConfig = testConfig(firstLock: "300ms")

    /// `testConfig` whose lock after the first wrong PIN is `firstLock` and whose longest lock is `longestLock`
    /// (durations as manager.conf writes them: 300ms, 3s, 1h), with a permanent lock at `maxAttempts` failures and,
    /// where given, `freeAttempts` failures that lock nothing.
    public static func testConfig(
        firstLock: String, longestLock: String = "5s", maxAttempts: Int = 4, freeAttempts: Int? = nil
    ) -> String {
        """
        [pin]
        hash_iterations = 2000
        [lockout]
        base_delay = \(firstLock)
        max_delay = \(longestLock)
        max_attempts = \(maxAttempts)\(freeAttempts.map { "\nfree_attempts = \($0)" } ?? "")
        [limits]
        registrations_per_address = 1000
        registrations_per_email = 1000
        decrypts_per_address = 1000
        """
    }

    /// `testConfig` with the `pam` service configured by `lines` (roles, authenticators, attributes…).
    public static func testConfig(pamService lines: String...) -> String {
        testConfig + "\n[services]\nnames = pam\n[service.pam]\nname = Linux login\n" + lines.joined(separator: "\n")
            + "\n"
    }

    public init(
        config: String = ManagerFiles.testConfig, database: TestDatabase = .sqlite,
        directory: TemporaryDirectory = TemporaryDirectory()
    ) throws {
        self.directory = directory
        self.database = database
        dataDirectory = directory.file("manager")
        var config = config
        if database == .postgreSQL {
            let storage = try PostgreSQLServer.shared().makeDatabase()
            postgreSQLDatabase = storage.name
            config += "\n" + storage.config + "\n"
        } else {
            postgreSQLDatabase = nil
        }
        configPath = try directory.write("manager.conf", config)
    }

    /// The files of a second instance on `other`'s database, with copies of its signing key and pepper (as an admin
    /// distributes them).
    public init(sharingDatabaseWith other: ManagerFiles) throws {
        directory = TemporaryDirectory()
        database = other.database
        postgreSQLDatabase = other.postgreSQLDatabase
        dataDirectory = directory.file("manager")
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        for file in ["signing-key.pem", "pin-sealing-key.pem", "pin-pepper"] {
            try FileManager.default.copyItem(
                atPath: other.dataDirectory + "/" + file, toPath: dataDirectory + "/" + file)
        }
        configPath = try directory.write("manager.conf", try String(contentsOfFile: other.configPath, encoding: .utf8))
    }

    /// The rows of one query against this manager's database (sqlite3 or psql), one line per row, columns split by '|'.
    public func query(_ statement: String) throws -> [String] {
        let output: String
        if let postgreSQLDatabase {
            output = try PostgreSQLServer.shared().query(statement, database: postgreSQLDatabase)
        } else {
            let result = try ChildProcess(
                "/usr/bin/sqlite3", ["-cmd", ".timeout 5000", dataDirectory + "/manager.sqlite", statement],
                in: directory
            )
            .wait()
            guard result.status == 0 else { throw TestFailure("sqlite3 \(statement.prefix(60)): \(result.stderr)") }
            output = result.stdout
        }
        return output.split(separator: "\n").map(String.init)
    }

    public var outbox: String { dataDirectory + "/outbox/new" }

    /// The name this manager's PIN-check claims carry (`pin_check_by`), kept in its data directory.
    public var instanceId: String {
        get throws {
            try String(contentsOfFile: dataDirectory + "/instance-id", encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    /// The database's size in bytes: the SQLite file with its WAL, or PostgreSQL's pg_database_size.
    public func databaseSize() throws -> Int {
        if let postgreSQLDatabase {
            return Int(try PostgreSQLServer.shared().query("SELECT pg_database_size('\(postgreSQLDatabase)')")) ?? -1
        }
        return ["", "-wal"].reduce(0) { total, suffix in
            total
                + ((try? FileManager.default.attributesOfItem(atPath: dataDirectory + "/manager.sqlite" + suffix)[.size]
                    as? Int) ?? 0)
        }
    }

    /// Runs `xign-manager admin …` against this manager's data.
    public func admin(_ arguments: [String]) throws -> ChildProcess.Result {
        let child = try ChildProcess(
            try Products.path("xign-manager"),
            ["admin"] + arguments + ["--config", configPath, "--data-dir", dataDirectory],
            in: directory
        )
        return try child.wait()
    }

    /// Gives `email` the login name `name` on every host, as a host whose local users were made by hand needs it (the
    /// account may be the hosts' own `name`, whatever its uid).
    public func giveLogin(_ email: String, _ name: String) throws {
        for arguments in [
            ["accounts", "set-login", email, name], ["accounts", "set-host-groups", email, "--all"],
            ["accounts", "set-local-user", email, "yes"],
        ] {
            let result = try admin(arguments)
            guard result.status == 0 else {
                throw TestFailure("\(arguments.prefix(2).joined(separator: " ")): \(result.stderr)")
            }
        }
    }

    /// The mails in the outbox, oldest first.
    public func mails() throws -> [String] {
        guard FileManager.default.fileExists(atPath: outbox) else { return [] }
        return try FileManager.default.contentsOfDirectory(atPath: outbox).sorted().map { outbox + "/" + $0 }
    }

    /// The activation data of the newest activation mail to `email` (device notices carry none).
    public func activationLink(for email: String) throws -> String {
        try PersonalizationPayload(parsingMail: String(contentsOfFile: try mailPath(for: email), encoding: .utf8))
            .deepLink
    }

    /// The App-Link in the body of the newest activation mail to `email`: what a phone opens.
    public func activationAppLink(for email: String) throws -> String {
        let mail = try String(contentsOfFile: try mailPath(for: email), encoding: .utf8)
        guard let line = mail.split(whereSeparator: \.isNewline).first(where: { $0.contains("/link/personalize#") }),
            let start = line.range(of: "http")
        else { throw TestFailure("the activation mail to \(email) holds no App-Link") }
        return String(line[start.lowerBound...]).trimmingCharacters(in: .whitespaces)
    }

    /// The newest activation mail to `email`.
    public func mailPath(for email: String) throws -> String {
        for mail in try mails().reversed() {
            let text = try String(contentsOfFile: mail, encoding: .utf8)
            if text.contains("To: \(email)\r\n"), text.contains("\r\n\(PersonalizationPayload.mailHeader): ") {
                return mail
            }
        }
        throw TestFailure("no activation mail to \(email) in \(outbox)")
    }

    /// The subjects of the mails to `email`, oldest first.
    public func subjects(to email: String) throws -> [String] {
        try mails().compactMap { mail in
            let text = try String(contentsOfFile: mail, encoding: .utf8)
            guard text.contains("To: \(email)\r\n") else { return nil }
            return text.components(separatedBy: "\r\n").first { $0.hasPrefix("Subject: ") }.map {
                String($0.dropFirst(9))
            }
        }
    }

    /// New activation data for the activation of `email` that has `alias` (xign-manager admin reissue); its link.
    public func reissue(_ email: String) throws -> String {
        let list = try admin(["activations", "--json", "--email", email])
        let activations = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]] ?? []
        guard let id = activations.first?["id"] as? String else {
            throw TestFailure("no activation of \(email): \(list.stderr)")
        }
        let result = try admin(["reissue", id])
        guard result.status == 0 else { throw TestFailure("reissue: \(result.stderr)") }
        return try activationLink(for: email)
    }

}
