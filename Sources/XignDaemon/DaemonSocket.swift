import Foundation
import XignLogin

/// xignd's listening socket: the one systemd passes, or one it binds itself (tests, hosts without systemd).
public enum DaemonSocket {
    /// The socket systemd passed (sd_listen_fds: LISTEN_PID is us, LISTEN_FDS is 1, the descriptor is 3).
    public static func fromSystemd() throws -> Int32 {
        let environment = ProcessInfo.processInfo.environment
        guard environment["LISTEN_PID"] == String(getpid()), environment["LISTEN_FDS"] == "1" else {
            throw DaemonSetupError("no socket from systemd (start xignd.socket) and no --socket given")
        }
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_FDNAMES")
        return 3
    }

    /// Binds `path`, replacing a stale socket there (never another kind of file), world-connectable. The socket gets
    /// its mode from the umask at bind: a chmod by path afterwards would follow a link someone put there meanwhile.
    public static func listen(at path: String) throws -> Int32 {
        try checkParent(of: path)
        var status = stat()
        if lstat(path, &status) == 0 {
            guard status.st_mode & S_IFMT == S_IFSOCK else {
                throw DaemonSetupError("\(path) exists and is not a socket")
            }
            unlink(path)
        }
        guard var address = socketAddress(path) else { throw DaemonSetupError("\(path) is too long for a socket path") }
        let descriptor = Foundation.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        let previous = umask(0o111)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        umask(previous)
        guard descriptor >= 0, bound == 0, Foundation.listen(descriptor, 64) == 0 else {
            throw DaemonSetupError("cannot listen at \(path): \(String(cString: strerror(errno)))")
        }
        return descriptor
    }

    /// The next connection on `listener`, close-on-exec. Out of descriptors, it waits for connections to end instead
    /// of spinning.
    static func nextConnection(on listener: Int32) -> DaemonConnection {
        while true {
            let descriptor = accept(listener, nil, nil)
            if descriptor >= 0 {
                _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
                return DaemonConnection(descriptor: descriptor)
            }
            if errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM { usleep(100_000) }
        }
    }

    /// The socket's directory must be one only its owner (root, or xignd's user) writes; anyone else could swap the
    /// socket for a link, or another socket, between our steps.
    static func checkParent(of path: String) throws {
        let parent = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        var status = stat()
        guard lstat(parent.isEmpty ? "/" : parent, &status) == 0, status.st_mode & S_IFMT == S_IFDIR else {
            throw DaemonSetupError(
                "\(parent) is not a directory; give --socket a path in a directory such as /run/xignd")
        }
        guard status.st_uid == 0 || status.st_uid == geteuid(), status.st_mode & 0o022 == 0 else {
            throw DaemonSetupError(
                "\(parent) can be written by other users, who could swap the socket for a link; give --socket a path in a directory only root writes, such as /run/xignd"
            )
        }
    }
}

/// Why xignd cannot start, with what to do.
public struct DaemonSetupError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
