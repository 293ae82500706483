import FoundationEssentials
import XignCore

#if canImport(Glibc)
import Glibc
#endif

/// One stream connection to or from xignd. A message is JSON after its length (4 bytes, big-endian), at most
/// `maximumMessageSize`. Every send and receive has a deadline, so neither end waits on a silent peer for ever.
/// One thread uses a connection at a time.
public final class DaemonConnection: @unchecked Sendable {
    public static let defaultSocketPath = "/run/xign/xignd.sock"
    public static let maximumMessageSize = 16 * 1024

    /// Why a message did not go through; each ends the connection.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// No xignd listens at the path (or it cannot be reached): errno's text.
        case unreachable(String)
        case timedOut
        /// The peer closed the connection before the message was complete.
        case closed
        case tooLarge(Int)
        case malformed(String)

        public var description: String {
            switch self {
            case .unreachable(let why): "xignd cannot be reached: \(why)"
            case .timedOut: "xignd did not answer in time"
            case .closed: "xignd closed the connection"
            case .tooLarge(let size):
                "a message of \(size) bytes is over the limit of \(DaemonConnection.maximumMessageSize)"
            case .malformed(let why): "a malformed message: \(why)"
            }
        }
    }

    public let descriptor: Int32

    public init(descriptor: Int32) { self.descriptor = descriptor }

    deinit { close(descriptor) }

    /// Connects to xignd's socket at `path`, waiting at most `timeoutMilliseconds` (a full backlog blocks).
    public static func connect(path: String, timeoutMilliseconds: Int) throws -> DaemonConnection {
        guard var address = socketAddress(path) else {
            throw Failure.unreachable("the socket path \(path.prefix(64)) is too long")
        }
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw Failure.unreachable(String(cString: strerror(errno))) }
        let connection = DaemonConnection(descriptor: descriptor)
        var timeout = timeval(tv_sec: timeoutMilliseconds / 1000, tv_usec: (timeoutMilliseconds % 1000) * 1000)
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard result == 0 else {
            let error = errno
            throw error == EAGAIN || error == EINPROGRESS
                ? Failure.timedOut : Failure.unreachable("\(path): \(String(cString: strerror(error)))")
        }
        return connection
    }

    public func send<Message: Encodable>(_ message: Message, deadline: MonotonicClock.Instant) throws {
        let body = try JSONEncoder().encode(message)
        guard body.count <= Self.maximumMessageSize else { throw Failure.tooLarge(body.count) }
        let length = UInt32(body.count)
        var frame = [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)]
        frame.append(contentsOf: body)
        defer { frame.withUnsafeMutableBytes { _ = memset($0.baseAddress!, 0, $0.count) } }
        try write(frame, until: deadline)
    }

    /// Sends `frame` whole by `deadline`: the raw bytes, for a protocol of its own (DirectoryQuery).
    public func write(_ frame: [UInt8], until deadline: MonotonicClock.Instant) throws {
        var sent = 0
        while sent < frame.count {
            try wait(for: Int16(POLLOUT), until: deadline)
            let count = frame.withUnsafeBytes {
                Glibc.send(
                    descriptor, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
            }
            if count < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw errno == EPIPE || errno == ECONNRESET
                    ? Failure.closed : Failure.unreachable(String(cString: strerror(errno)))
            }
            sent += count
        }
    }

    public func receive<Message: Decodable>(_ type: Message.Type, deadline: MonotonicClock.Instant) throws -> Message {
        let header = try read(4, until: deadline)
        let length = header.reduce(0) { $0 << 8 | Int($1) }
        guard length <= Self.maximumMessageSize else { throw Failure.tooLarge(length) }
        var body = try read(length, until: deadline)
        defer { body.withUnsafeMutableBytes { _ = memset($0.baseAddress!, 0, $0.count) } }
        do { return try JSONDecoder().decode(type, from: Data(body)) } catch {
            throw Failure.malformed("\(error)".prefix(200).description)
        }
    }

    /// Exactly `count` bytes by `deadline`.
    public func read(_ count: Int, until deadline: MonotonicClock.Instant) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var received = 0
        while received < count {
            try wait(for: Int16(POLLIN), until: deadline)
            let result = bytes.withUnsafeMutableBytes {
                recv(descriptor, $0.baseAddress! + received, count - received, Int32(MSG_DONTWAIT))
            }
            if result == 0 { throw Failure.closed }
            if result < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw errno == ECONNRESET ? Failure.closed : Failure.unreachable(String(cString: strerror(errno)))
            }
            received += result
        }
        return bytes
    }

    private func wait(for events: Int16, until deadline: MonotonicClock.Instant) throws {
        while true {
            let remaining = deadline.milliseconds - MonotonicClock.now().milliseconds
            guard remaining > 0 else { throw Failure.timedOut }
            var entry = pollfd(fd: descriptor, events: events, revents: 0)
            let result = poll(&entry, 1, Int32(min(remaining, Int64(Int32.max))))
            if result > 0 { return }
            if result == 0 { throw Failure.timedOut }
            if errno != EINTR { throw Failure.unreachable(String(cString: strerror(errno))) }
        }
    }
}

/// The address of the unix socket at `path`; nil when the path does not fit (107 bytes).
public func socketAddress(_ path: String) -> sockaddr_un? {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    guard path.utf8.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path.utf8) }
    return address
}

extension MonotonicClock.Instant {
    /// The instant `milliseconds` from now.
    public static func deadline(in milliseconds: Int) -> Self { MonotonicClock.now().advanced(by: Int64(milliseconds)) }
}

extension DaemonConnection {
    /// Who is at the other end (SO_PEERCRED): the kernel's word, not the caller's.
    public struct PeerCredentials: Sendable, Equatable {
        public let pid: pid_t
        public let uid: uid_t
        public let gid: gid_t
    }

    /// Who is at the other end, as the kernel saw it at connect (SO_PEERCRED); it cannot be forged by the peer.
    public func peerCredentials() -> PeerCredentials? {
        // struct ucred is pid_t, uid_t, gid_t: three 32-bit fields (Glibc hides the type without _GNU_SOURCE).
        var fields = [UInt32](repeating: 0, count: 3)
        var length = socklen_t(MemoryLayout<UInt32>.size * 3)
        let result = fields.withUnsafeMutableBytes {
            getsockopt(descriptor, SOL_SOCKET, SO_PEERCRED, $0.baseAddress, &length)
        }
        guard result == 0, length == MemoryLayout<UInt32>.size * 3 else { return nil }
        return PeerCredentials(pid: pid_t(bitPattern: fields[0]), uid: fields[1], gid: fields[2])
    }
}
