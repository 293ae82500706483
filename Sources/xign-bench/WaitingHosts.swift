import CEpoll
import Foundation
import Synchronization
import XignCrypto
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// Hosts waiting for their confirmations as pam_xign does (one long poll after another on a keep-alive
/// connection), thousands of them driven by one epoll thread. Records when each decision arrived.
final class WaitingHosts: @unchecked Sendable {
    struct Waiter {
        var confirmationId: String
        var request: [UInt8]
        var inbox: [UInt8] = []
    }

    private let epoll: Int32
    private var waiters: [Int32: Waiter] = [:]
    private let decided = Mutex([String: (state: String, at: UInt64)]())
    let answers = Atomic<Int>(0)
    let failures = Mutex([String]())
    private let stopped = Atomic<Bool>(false)
    private var thread: Thread?

    /// Connects one keep-alive connection per confirmation to `port` on 127.0.0.1 and sends its first wait.
    init(port: Int, confirmations: [(id: String, waitToken: String)], waitMilliseconds: Int) throws {
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epoll >= 0 else { throw Self.failure("epoll_create1") }
        for confirmation in confirmations {
            let body = try JSONEncoder.canonical.encode(
                ConfirmationWaitRequest(
                    confirmationId: confirmation.id, waitToken: confirmation.waitToken,
                    waitMilliseconds: waitMilliseconds))
            let head =
                "POST \(APIPath.confirmationWait) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\n\r\n"
            let fd = try Self.connect(port: port)
            waiters[fd] = Waiter(confirmationId: confirmation.id, request: Array(head.utf8) + Array(body))
            var event = epoll_event()
            event.events = UInt32(EPOLLIN.rawValue)
            event.data.fd = fd
            guard epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event) == 0 else { throw Self.failure("epoll_ctl") }
            try send(fd)
        }
        let thread = Thread { [self] in loop() }
        thread.stackSize = 1 << 20
        self.thread = thread
        thread.start()
    }

    /// The decision's state and when it arrived (uptime ns), once it has.
    func decision(of confirmationId: String) -> (state: String, at: UInt64)? { decided.withLock { $0[confirmationId] } }

    func stop() {
        stopped.store(true, ordering: .relaxed)
        while thread?.isFinished == false { usleep(10_000) }
        for fd in waiters.keys { close(fd) }
        close(epoll)
    }

    private func loop() {
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while !stopped.load(ordering: .relaxed) {
            let count = epoll_wait(epoll, &events, Int32(events.count), 100)
            for index in 0..<max(0, Int(count)) {
                let fd = events[index].data.fd
                let read = recv(fd, &buffer, buffer.count, 0)
                guard read > 0 else {
                    drop(
                        fd,
                        "the manager closed a waiting connection (\(read == 0 ? "EOF" : String(cString: strerror(errno))))"
                    )
                    continue
                }
                waiters[fd]?.inbox += buffer[0..<read]
                while let answer = takeAnswer(fd) { handle(answer, on: fd) }
            }
        }
    }

    private func handle(_ body: [UInt8], on fd: Int32) {
        guard let waiter = waiters[fd] else { return }
        let parts = body.split(separator: UInt8(ascii: "."))
        guard parts.count == 3, let payload = Base64URL.decode(String(decoding: parts[1], as: UTF8.self)),
            let object = try? JSONSerialization.jsonObject(with: payload) as? [String: Any],
            let state = object["state"] as? String
        else {
            return drop(
                fd, "an answer that is not a signed state: \(String(decoding: body.prefix(200), as: UTF8.self))")
        }
        answers.add(1, ordering: .relaxed)
        guard state == "pending" else {
            let now = DispatchTime.now().uptimeNanoseconds
            decided.withLock { $0[waiter.confirmationId] = (state, now) }
            return
        }
        do { try send(fd) } catch { drop(fd, "\(error)") }
    }

    /// A whole answer's body from the connection's inbox, when one is there.
    private func takeAnswer(_ fd: Int32) -> [UInt8]? {
        guard let inbox = waiters[fd]?.inbox, let end = inbox.offsets(of: [13, 10, 13, 10]).first else { return nil }
        let head = String(decoding: inbox[..<end], as: UTF8.self).lowercased()
        guard let line = head.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
            let length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)),
            inbox.count >= end + 4 + length
        else { return nil }
        waiters[fd]?.inbox = Array(inbox[(end + 4 + length)...])
        guard head.hasPrefix("http/1.1 200") else {
            drop(fd, "answered \(head.prefix(40))")
            return nil
        }
        return Array(inbox[(end + 4)..<(end + 4 + length)])
    }

    private func send(_ fd: Int32) throws {
        guard let request = waiters[fd]?.request else { return }
        let sent = request.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == request.count else { throw Self.failure("send") }
    }

    private func drop(_ fd: Int32, _ reason: String) {
        failures.withLock { $0.append(reason) }
        epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nil)
        close(fd)
        waiters[fd] = nil
    }

    private static func connect(port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw failure("socket") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(fd)
            throw failure("connect")
        }
        return fd
    }

    private static func failure(_ call: String) -> NSError {
        NSError(
            domain: "WaitingHosts", code: Int(errno),
            userInfo: [NSLocalizedDescriptionKey: "\(call): \(String(cString: strerror(errno)))"])
    }
}

extension [UInt8] {
    /// Each place where `needle` starts in these bytes.
    func offsets(of needle: [UInt8]) -> [Int] {
        guard !needle.isEmpty, count >= needle.count else { return [] }
        return (0...(count - needle.count)).filter { self[$0..<($0 + needle.count)].elementsEqual(needle) }
    }
}
