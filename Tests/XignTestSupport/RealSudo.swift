import Foundation

/// The real sudo with a PAM service of its own, named for `user` in /etc/sudoers.d. sudoers takes the last
/// `pam_service` it reads for a user, so the tests that do this take turns.
public enum RealSudo {
    private static let turn = NSLock()

    /// Runs `body` while /etc/pam.d holds `pamLines` as a service that sudo uses for `user` (who may run anything),
    /// with `defaults` (sudoers options such as `passwd_tries=1`) besides.
    public static func withService<T>(
        for user: String, pamLines: String, defaults: [String] = [], _ body: () throws -> T
    ) throws -> T {
        turn.lock()
        defer { turn.unlock() }
        let service = "xign-test-sudo-\(getpid())"
        let pamFile = "/etc/pam.d/\(service)", sudoersFile = "/etc/sudoers.d/xign-test-\(getpid())"
        defer {
            try? FileManager.default.removeItem(atPath: pamFile)
            try? FileManager.default.removeItem(atPath: sudoersFile)
        }
        try writeTestFile(pamFile, Data(pamLines.utf8), mode: 0o644)
        let options = (["pam_service=\(service)"] + defaults).joined(separator: ", ")
        try writeTestFile(sudoersFile, Data("Defaults:\(user) \(options)\n\(user) ALL=(ALL) ALL\n".utf8), mode: 0o440)
        let check = try ChildProcess("/usr/sbin/visudo", ["-c", "-f", sudoersFile], in: TemporaryDirectory()).wait()
        guard check.status == 0 else {
            throw TestFailure("visudo refused the test's sudoers file: \(check.stdout)\(check.stderr)")
        }
        let syslog = SyslogCapture()
        do {
            let result = try body()
            _ = syslog?.stop()
            return result
        } catch {
            // What the module logged says why a login it ran failed, which sudo's one line does not.
            guard let lines = syslog?.stop(), !lines.isEmpty else { throw error }
            throw TestFailure("\(error)\nsyslog while sudo ran:\n\(lines)")
        }
    }

    /// `sudo -k id -un` run by `user` in a pseudo-terminal, after `prefix` (a session to run in) and inside `shell`
    /// (`exec` prepended by the caller's words, such as `ulimit -n 8;`).
    public static func run(
        as user: String, in prefix: [String] = [], before shell: String = ""
    ) throws -> PseudoTerminal {
        let command =
            prefix + [
                "/usr/sbin/runuser", "-u", user, "--", "/bin/sh", "-c",
                "\(shell) exec /usr/bin/sudo -k /usr/bin/id -un",
            ]
        return try PseudoTerminal(
            command[0], Array(command.dropFirst()),
            environment: ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "TERM": "xterm"])
    }
}
