import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The real OpenSSH server on loopback, its PAM service in a private directory (pam_wrapper), and the real
/// `ssh` client in a pseudo-terminal, as a user types.
public final class SSHServer: @unchecked Sendable {
    public let directory = TemporaryDirectory()
    public let port: Int
    public let method: String
    private let process: ChildProcess

    /// A local account to log in as; created once per machine, without a password.
    public static let user: Result<String, any Error> = Result {
        let name = "xigntest"
        if getpwnam(name) == nil {
            let result = try ChildProcess(
                "/usr/sbin/useradd", ["--create-home", "--shell", "/bin/sh", name], in: TemporaryDirectory()
            ).wait()
            guard result.status == 0 || getpwnam(name) != nil else { throw TestFailure("useradd: \(result.stderr)") }
        }
        return name
    }

    /// `method`: keyboard-interactive, or password (sshd then feeds the typed password to every PAM prompt).
    /// `launcher`: what sshd runs under, such as nsenter into a host's mount namespace.
    public init(pamServices: String, method: String = "keyboard-interactive", launcher: [String] = []) throws {
        self.method = method
        let keygen = try ChildProcess(
            "/usr/bin/ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", directory.file("host_key")], in: directory
        )
        .wait()
        guard keygen.status == 0 else { throw TestFailure("ssh-keygen: \(keygen.stderr)") }
        port = try LoopbackSocket.unusedPort()
        let config = try directory.write(
            "sshd_config",
            """
            Port \(port)
            ListenAddress 127.0.0.1
            HostKey \(directory.file("host_key"))
            PidFile \(directory.file("sshd.pid"))
            UsePAM yes
            KbdInteractiveAuthentication \(method == "password" ? "no" : "yes")
            PasswordAuthentication \(method == "password" ? "yes" : "no")
            PermitEmptyPasswords no
            PubkeyAuthentication no
            AuthenticationMethods \(method)
            PermitRootLogin no
            StrictModes no
            LoginGraceTime 60
            LogLevel VERBOSE

            """)
        try FileManager.default.createDirectory(
            atPath: "/run/sshd", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        var environment = ProcessInfo.processInfo.environment
        environment["LD_PRELOAD"] = "libpam_wrapper.so"
        environment["PAM_WRAPPER"] = "1"
        environment["PAM_WRAPPER_SERVICE_DIR"] = pamServices
        let command = launcher + ["/usr/sbin/sshd", "-D", "-e", "-f", config]
        process = try ChildProcess(command[0], Array(command.dropFirst()), environment: environment, in: directory)
        let deadline = Date().addingTimeInterval(10)
        while !LoopbackSocket.isListening(port) {
            guard Date() < deadline, process.poll() == nil else { throw TestFailure("sshd did not start: \(log)") }
            usleep(20_000)
        }
    }

    public var log: String { (try? String(contentsOfFile: process.stderrPath, encoding: .utf8)) ?? "" }

    /// `ssh user@127.0.0.1 COMMAND` in a pseudo-terminal, with the server's one method, and no known-hosts file;
    /// `terminal`: ask for a terminal on the server too (`-t`), as sudo there needs.
    public func ssh(_ user: String, _ command: String, terminal: Bool = false) throws -> PseudoTerminal {
        try PseudoTerminal(
            "/usr/bin/ssh",
            [
                "-p", "\(port)", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o",
                "LogLevel=ERROR",
                "-o", "PreferredAuthentications=\(method)", "-o", "NumberOfPasswordPrompts=1",
            ] + (terminal ? ["-t"] : []) + [
                "\(user)@127.0.0.1", command,
            ], environment: ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "TERM": "xterm"])
    }

    /// The listening sshd; each connection is a child of it.
    public var pid: pid_t { process.pid }

    deinit { process.stop() }
}
