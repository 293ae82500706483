import ArgumentParser
import Foundation
import XignCore
import XignDaemon

/// xignd: logins and approvals for callers without root (screen lockers, `xign-setup approve` in a desktop
/// session). Verification only: it never enrolls or removes anything.
@main
struct Xignd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "xignd",
        abstract: "Check XignIn PINs for callers without root, such as screen lockers.",
        discussion: "Under systemd it takes its socket from xignd.socket; otherwise it listens at --socket.",
        version: XignCoreVersion.string
    )

    @Option(help: "Config file.") var config = ClientConfiguration.defaultPath
    @Option(help: "Listen at this path (mode 0666) instead of taking the socket from systemd.") var socket: String?
    @Option(help: "Connections open at once, in all.") var maxConnections = 64
    @Option(help: "Connections open at once for one uid.") var maxConnectionsPerUser = 8

    func validate() throws {
        guard (1...4096).contains(maxConnections), (1...maxConnections).contains(maxConnectionsPerUser) else {
            throw ValidationError("--max-connections must be 1 to 4096 and --max-connections-per-user 1 to that")
        }
        if let socket, !socket.hasPrefix("/") || socket.utf8.count >= 108 {
            throw ValidationError("--socket must be an absolute path under 108 bytes")
        }
    }

    func run() throws {
        guard geteuid() == 0 else { throw ValidationError("xignd runs as root: it reads /var/lib/xign and the TPM for its callers") }
        signal(SIGPIPE, SIG_IGN)
        // libtss2 logs its own errors to stderr; the login's log line says the same with what to do.
        setenv("TSS2_LOG", "all+none", 0)
        let daemon: Daemon
        let listener: Int32
        do {
            daemon = try Daemon(configPath: config, maximumConnections: maxConnections, maximumPerUid: maxConnectionsPerUser)
            listener = try socket.map(Self.listen(at:)) ?? Self.systemdSocket()
        } catch {
            FileHandle.standardError.write(Data("<3>xignd: \(error)\n".utf8))
            throw ExitCode.failure
        }
        daemon.serve(listener)
    }

    /// The socket systemd passed (sd_listen_fds: LISTEN_PID is us, LISTEN_FDS is 1, the descriptor is 3).
    static func systemdSocket() throws -> Int32 {
        let environment = ProcessInfo.processInfo.environment
        guard environment["LISTEN_PID"] == String(getpid()), environment["LISTEN_FDS"] == "1" else {
            throw XigndError("no socket from systemd (start xignd.socket) and no --socket given")
        }
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_FDNAMES")
        return 3
    }

    /// Binds `path`, replacing a stale socket there (never another kind of file), world-connectable. The socket gets
    /// its mode from the umask at bind: a chmod by path afterwards would follow a link someone put there meanwhile.
    static func listen(at path: String) throws -> Int32 {
        try checkParent(of: path)
        var status = stat()
        if lstat(path, &status) == 0 {
            guard status.st_mode & S_IFMT == S_IFSOCK else { throw XigndError("\(path) exists and is not a socket") }
            unlink(path)
        }
        guard var address = socketAddress(path) else { throw XigndError("\(path) is too long for a socket path") }
        let descriptor = Foundation.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        let previous = umask(0o111)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        umask(previous)
        guard descriptor >= 0, bound == 0, Foundation.listen(descriptor, 64) == 0 else {
            throw XigndError("cannot listen at \(path): \(String(cString: strerror(errno)))")
        }
        return descriptor
    }

    /// The socket's directory must be one only its owner (root, or xignd's user) writes; anyone else could swap the
    /// socket for a link, or another socket, between our steps.
    static func checkParent(of path: String) throws {
        let parent = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        var status = stat()
        guard lstat(parent.isEmpty ? "/" : parent, &status) == 0, status.st_mode & S_IFMT == S_IFDIR else {
            throw XigndError("\(parent) is not a directory; give --socket a path in a directory such as /run/xignd")
        }
        guard status.st_uid == 0 || status.st_uid == geteuid(), status.st_mode & 0o022 == 0 else {
            throw XigndError(
                "\(parent) can be written by other users, who could swap the socket for a link; give --socket a path in a directory only root writes, such as /run/xignd"
            )
        }
    }
}

struct XigndError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
