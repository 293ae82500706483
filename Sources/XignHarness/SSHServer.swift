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

    /// `method`: keyboard-interactive, or password (sshd then feeds the typed password to every PAM prompt), or
    /// publickey, or a list sshd's AuthenticationMethods takes (`publickey,keyboard-interactive`: both, in turn;
    /// `publickey keyboard-interactive`: either).
    /// `launcher`: what sshd runs under, such as nsenter into a host's mount namespace. `authorizedKeys`: each user's
    /// public keys (`SSHServer.clientKey`), in a directory of the server's own.
    public init(
        pamServices: String, method: String = "keyboard-interactive", launcher: [String] = [],
        authorizedKeys: [String: String] = [:]
    ) throws {
        self.method = method
        try Self.keygen(directory.file("host_key"))
        port = try LoopbackSocket.unusedPort()
        // sshd reads a user's keys as that user: the directory is open to all, each file readable.
        let keys = directory.file("authorized_keys")
        try FileManager.default.createDirectory(
            atPath: keys, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
        chmod(directory.path, 0o755)
        for (user, key) in authorizedKeys { try writeTestFile(keys + "/" + user, Data((key + "\n").utf8), mode: 0o644) }
        let methods = Set(method.split(whereSeparator: { $0 == "," || $0 == " " }).map(String.init))
        let config = try directory.write(
            "sshd_config",
            """
            Port \(port)
            ListenAddress 127.0.0.1
            HostKey \(directory.file("host_key"))
            PidFile \(directory.file("sshd.pid"))
            UsePAM yes
            KbdInteractiveAuthentication \(methods.contains("keyboard-interactive") ? "yes" : "no")
            PasswordAuthentication \(methods.contains("password") ? "yes" : "no")
            PermitEmptyPasswords no
            PubkeyAuthentication \(methods.contains("publickey") ? "yes" : "no")
            AuthorizedKeysFile \(keys)/%u
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

    /// `ssh user@127.0.0.1 COMMAND` in a pseudo-terminal, with the server's methods (or `methods`), and no
    /// known-hosts file; `terminal`: ask for a terminal on the server too (`-t`), as sudo there needs; `identity`: the
    /// private key file to offer, and no other.
    public func ssh(
        _ user: String, _ command: String, terminal: Bool = false, identity: String? = nil, methods: String? = nil
    ) throws -> PseudoTerminal {
        try PseudoTerminal(
            "/usr/bin/ssh",
            [
                "-p", "\(port)", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o",
                "LogLevel=ERROR",
                "-o", "PreferredAuthentications=\(methods ?? method)", "-o", "NumberOfPasswordPrompts=1",
            ] + (identity.map { ["-i", $0, "-o", "IdentitiesOnly=yes"] } ?? ["-o", "PubkeyAuthentication=no"])
                + (terminal ? ["-t"] : []) + [
                    "\(user)@127.0.0.1", command,
                ], environment: ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "TERM": "xterm"])
    }

    /// A new ed25519 key pair for a client: the private key's path and the public key's line.
    public static func clientKey(
        in directory: TemporaryDirectory, named name: String = "id_ed25519"
    ) throws -> (
        privateKey: String, publicKey: String
    ) {
        let path = directory.file(name)
        try keygen(path)
        return (path, try String(contentsOfFile: path + ".pub", encoding: .utf8).trimmingCharacters(in: .newlines))
    }

    private static func keygen(_ path: String) throws {
        let keygen = try ChildProcess(
            "/usr/bin/ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", path], in: TemporaryDirectory()
        ).wait()
        guard keygen.status == 0 else { throw TestFailure("ssh-keygen: \(keygen.stderr)") }
    }

    /// The listening sshd; each connection is a child of it.
    public var pid: pid_t { process.pid }

    deinit { process.stop() }
}
