import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A TCP socket on 127.0.0.1 with a port the kernel picked.
public enum LoopbackSocket {
    /// Binds and listens; returns the socket and its port.
    public static func listen() throws -> (fd: Int32, port: Int) {
        let (fd, port) = try bind()
        guard Glibc.listen(fd, 16) == 0 else {
            close(fd)
            throw TestFailure("cannot listen on 127.0.0.1: \(String(cString: strerror(errno)))")
        }
        return (fd, port)
    }

    /// Whether something accepts connections on 127.0.0.1:`port` now (a connection is made and closed).
    public static func isListening(_ port: Int) -> Bool {
        guard let fd = connect(port) else { return false }
        close(fd)
        return true
    }

    /// Whether the peer has neither closed nor reset `fd` and nothing waits to be read: the manager still holds it
    /// open. Reads nothing.
    public static func isHeldOpen(_ fd: Int32) -> Bool {
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, Int32(MSG_DONTWAIT | MSG_PEEK)) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
    }

    /// A connected socket to 127.0.0.1:`port`, or nil when nothing accepts there. `source` is the local address
    /// it comes from (any 127.x.y.z is this machine too), so a test can be two clients.
    public static func connect(_ port: Int, from source: String = "127.0.0.1") -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard bound else {
            close(fd)
            return nil
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else {
            close(fd)
            return nil
        }
        return fd
    }

    /// Sends `request` (raw HTTP/1.1, `Connection: close`) from `source` and returns the whole answer, or nil.
    public static func exchange(_ request: String, port: Int, from source: String, timeoutSeconds: Int = 10) -> String?
    {
        guard let fd = connect(port, from: source) else { return nil }
        defer { close(fd) }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let bytes = Array(request.utf8)
        guard bytes.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == bytes.count else {
            return nil
        }
        var answer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(fd, &chunk, chunk.count, 0)
            guard n > 0 else { break }
            answer += chunk.prefix(n)
        }
        return answer.isEmpty ? nil : String(decoding: answer, as: UTF8.self)
    }

    /// A loopback port that was free a moment ago and has no listener.
    public static func unusedPort() throws -> Int {
        let (fd, port) = try bind()
        close(fd)
        return port
    }

    private static func bind() throws -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard fd >= 0, ok else {
            close(fd)
            throw TestFailure("cannot bind 127.0.0.1: \(String(cString: strerror(errno)))")
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }
}
