import Foundation
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// The database a test manager uses: a temporary SQLite file, or a fresh database in the test cluster.
public enum TestDatabase: String, Sendable, CaseIterable {
    case sqlite
    case postgreSQL
}

/// The real xign-manager, started on 127.0.0.1 with an ephemeral port and a temporary database.
public final class ManagerProcess: @unchecked Sendable {
    public let directory: TemporaryDirectory
    public let dataDirectory: String
    public let configPath: String
    public let database: TestDatabase
    /// The PostgreSQL database's name, when `database` is `.postgreSQL`.
    public let postgreSQLDatabase: String?
    public private(set) var port: Int = 0
    private var process: ChildProcess?
    /// Runs before xign-manager on its command line, such as prlimit to give it the packaged unit's file limit.
    private let launcher: [String]

    /// Test settings: short lockout delays so escalation is observable, a cheap PIN hash, rate limits that only the
    /// abuse tests reach; `extraConfig` adds or overrides lines.
    public static let testConfig = """
        [pin]
        hash_iterations = 2000
        [lockout]
        base_delay = 300ms
        max_delay = 5s
        max_attempts = 4
        [limits]
        registrations_per_address = 1000
        registrations_per_email = 1000
        decrypts_per_address = 1000
        """

    /// `testConfig` with the `pam` service configured by `lines` (roles, authenticators, attributes…).
    public static func testConfig(pamService lines: String...) -> String {
        testConfig + "\n[services]\nnames = pam\n[service.pam]\nname = Linux login\n" + lines.joined(separator: "\n")
            + "\n"
    }

    public init(
        config: String = ManagerProcess.testConfig, database: TestDatabase = .sqlite, launcher: [String] = [],
        directory: TemporaryDirectory = TemporaryDirectory(), port: Int = 0
    ) throws {
        self.port = port
        self.directory = directory
        self.launcher = launcher
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
        try start()
    }

    /// A manager whose public URL is `http://localhost:PORT`, so that a browser may make passkeys for it: WebAuthn takes a
    /// host name as the RP id, never an IP address. It listens on 127.0.0.1 at a port chosen before it starts.
    public static func servingBrowsers(
        config: String = ManagerProcess.testConfig, database: TestDatabase = .sqlite
    ) throws -> ManagerProcess {
        let port = try freePort()
        return try ManagerProcess(
            config: config + "\n[server]\npublic_url = http://localhost:\(port)\n", database: database, port: port)
    }

    /// The public URL of a manager from `servingBrowsers`.
    public var browserURL: String { "http://localhost:\(port)" }

    /// A port nobody listens on at this moment (the kernel's pick for a socket bound to port 0, then closed).
    public static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket: \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else { throw TestFailure("bind: \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// A second instance on `other`'s database, with copies of its signing key and pepper (as an admin distributes them).
    public init(sharingDatabaseWith other: ManagerProcess) throws {
        directory = TemporaryDirectory()
        launcher = other.launcher
        database = other.database
        postgreSQLDatabase = other.postgreSQLDatabase
        dataDirectory = directory.file("manager")
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        for file in ["signing-key.pem", "pin-sealing-key.pem", "pin-pepper"] {
            try FileManager.default.copyItem(
                atPath: other.dataDirectory + "/" + file, toPath: dataDirectory + "/" + file)
        }
        configPath = try directory.write("manager.conf", try String(contentsOfFile: other.configPath, encoding: .utf8))
        try start()
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

    /// https when the config names a TLS certificate.
    public var url: ManagerURL {
        let tls = ((try? String(contentsOfFile: configPath, encoding: .utf8)) ?? "").contains("tls_certificate")
        return try! ManagerURL("\(tls ? "https" : "http")://127.0.0.1:\(port)")
    }

    /// Sends `signal` to the running server, such as SIGHUP to reload its certificate.
    public func send(_ signal: Int32) {
        process.map { _ = Glibc.kill($0.pid, signal) }
    }
    public var outbox: String { dataDirectory + "/outbox/new" }

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

    /// The running server's process id.
    public var pid: Int32? { process?.pid }

    /// Kills the server with SIGKILL, as a crash or a power cut would from the server's point of view.
    public func kill() {
        process?.kill()
        process = nil
    }

    /// Starts (or restarts, keeping the data and port when possible) the server.
    public func start() throws {
        let portFile = directory.file("port")
        try? FileManager.default.removeItem(atPath: portFile)
        let listen = "127.0.0.1:\(port)"
        let command =
            launcher + [
                try Products.path("xign-manager"),
                "serve", "--config", configPath, "--data-dir", dataDirectory, "--listen", listen, "--port-file",
                portFile,
            ]
        let child = try ChildProcess(command[0], Array(command.dropFirst()), in: directory)
        process = child
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if let text = try? String(contentsOfFile: portFile, encoding: .utf8),
                let bound = Int(text.trimmingCharacters(in: .whitespacesAndNewlines))
            {
                port = bound
                return
            }
            if let result = child.poll() {
                throw TestFailure("xign-manager exited with \(result.status): \(result.stderr)")
            }
            usleep(10_000)
        }
        throw TestFailure("xign-manager did not start within 30 s")
    }

    /// What the server printed so far (its log).
    public var log: String {
        guard let process else { return "" }
        return ((try? String(contentsOfFile: process.stdoutPath, encoding: .utf8)) ?? "")
            + ((try? String(contentsOfFile: process.stderrPath, encoding: .utf8)) ?? "")
    }

    /// The port of `/metrics` (`metrics.listen`; port 0 binds any, and the log names it), once the server says.
    public func metricsPort() throws -> Int {
        var port = 0
        let said = waitUntil {
            guard let line = log.split(separator: "\n").first(where: { $0.contains("metrics at http://127.0.0.1:") }),
                let found = line.split(separator: ":").last?.split(separator: "/").first.flatMap({ Int($0) })
            else { return false }
            port = found
            return true
        }
        guard said else { throw TestFailure("the manager did not say where its metrics are") }
        return port
    }

    /// The value of one sample of `/metrics`, such as `xign_database_statements_total`.
    public func metric(_ sample: String) throws -> Double {
        let request = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        guard let text = LoopbackSocket.exchange(request, port: try metricsPort(), from: "127.0.0.1") else {
            throw TestFailure("no answer from /metrics")
        }
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(sample + " ") }),
            let value = line.split(separator: " ").last.flatMap({ Double($0) })
        else { throw TestFailure("no \(sample) in the metrics") }
        return value
    }

    public func stop() {
        process?.stop()
        process = nil
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

    /// Gives the account of `email` the login name `name` and access to every host, as an administrator does.
    public func giveLogin(_ email: String, _ name: String) throws {
        for arguments in [["accounts", "set-login", email, name], ["accounts", "set-host-groups", email, "--all"]] {
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

    deinit { stop() }
}
