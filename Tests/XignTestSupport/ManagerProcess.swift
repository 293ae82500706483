import Foundation
import XignProtocol

/// The real xign-manager, started on 127.0.0.1 with an ephemeral port and a temporary SQLite database.
public final class ManagerProcess: @unchecked Sendable {
    public let directory: TemporaryDirectory
    public let dataDirectory: String
    public let configPath: String
    public private(set) var port: Int = 0
    private var process: ChildProcess?

    /// Test settings: short lockout delays so escalation is observable, a cheap PIN hash; `extraConfig` adds or overrides lines.
    public static let testConfig = """
        [pin]
        hash_iterations = 2000
        [lockout]
        base_delay = 300ms
        max_delay = 5s
        max_attempts = 4
        """

    /// `testConfig` with the `pam` service configured by `lines` (roles, authenticators, attributes…).
    public static func testConfig(pamService lines: String...) -> String {
        testConfig + "\n[services]\nnames = pam\n[service.pam]\nname = Linux login\n" + lines.joined(separator: "\n") + "\n"
    }

    public init(config: String = ManagerProcess.testConfig, directory: TemporaryDirectory = TemporaryDirectory()) throws {
        self.directory = directory
        dataDirectory = directory.file("manager")
        configPath = try directory.write("manager.conf", config)
        try start()
    }

    public var url: ManagerURL { try! ManagerURL("http://127.0.0.1:\(port)") }
    public var outbox: String { dataDirectory + "/outbox/new" }

    /// Starts (or restarts, keeping the data and port when possible) the server.
    public func start() throws {
        let portFile = directory.file("port")
        try? FileManager.default.removeItem(atPath: portFile)
        let listen = "127.0.0.1:\(port)"
        let child = try ChildProcess(
            try Products.path("xign-manager"),
            ["serve", "--config", configPath, "--data-dir", dataDirectory, "--listen", listen, "--port-file", portFile],
            in: directory
        )
        process = child
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if let text = try? String(contentsOfFile: portFile, encoding: .utf8), let bound = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
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
        return ((try? String(contentsOfFile: process.stdoutPath, encoding: .utf8)) ?? "") + ((try? String(contentsOfFile: process.stderrPath, encoding: .utf8)) ?? "")
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

    /// The mails in the outbox, oldest first.
    public func mails() throws -> [String] {
        guard FileManager.default.fileExists(atPath: outbox) else { return [] }
        return try FileManager.default.contentsOfDirectory(atPath: outbox).sorted().map { outbox + "/" + $0 }
    }

    /// The activation data of the newest mail to `email`.
    public func activationLink(for email: String) throws -> String {
        for mail in try mails().reversed() {
            let text = try String(contentsOfFile: mail, encoding: .utf8)
            if text.contains("To: \(email)\r\n") {
                return try PersonalizationPayload(parsingMail: text).deepLink
            }
        }
        throw TestFailure("no activation mail to \(email) in \(outbox)")
    }

    public func mailPath(for email: String) throws -> String {
        for mail in try mails().reversed() where (try String(contentsOfFile: mail, encoding: .utf8)).contains("To: \(email)\r\n") {
            return mail
        }
        throw TestFailure("no activation mail to \(email)")
    }

    deinit { stop() }
}
