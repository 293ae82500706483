import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What modules log to syslog while a test runs a program that loads them (sudo, su): these machines run no syslog
/// daemon, so the capture binds /dev/log itself and keeps every line, to be shown when the test fails. Nil where a
/// daemon already has /dev/log (its own log then has the lines).
public final class SyslogCapture: @unchecked Sendable {
    public static let path = "/dev/log"
    private let socket: Int32
    private let lock = NSLock()
    private var lines: [String] = []
    private var stopped = false
    private let reader = DispatchGroup()

    public init?() {
        guard access(Self.path, F_OK) != 0 else { return nil }
        socket = Glibc.socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        guard socket >= 0 else { return nil }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in raw.copyBytes(from: Array(Self.path.utf8)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socket, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0 else {
            close(socket)
            return nil
        }
        chmod(Self.path, 0o666)
        reader.enter()
        Thread.detachNewThread { [self] in
            defer { reader.leave() }
            var buffer = [UInt8](repeating: 0, count: 8192)
            while !isStopped {
                var poller = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, 100) > 0 else { continue }
                let count = recv(socket, &buffer, buffer.count, 0)
                guard count > 0 else { continue }
                let line = String(decoding: buffer[..<count], as: UTF8.self)
                lock.withLock { lines.append(line) }
            }
        }
    }

    private var isStopped: Bool { lock.withLock { stopped } }

    /// Stops listening, frees /dev/log and returns the lines that arrived, one per line.
    public func stop() -> String {
        lock.withLock { stopped = true }
        reader.wait()
        unlink(Self.path)
        close(socket)
        return lock.withLock { lines.joined(separator: "\n") }
    }
}
