import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A model of network distance between a host and the manager, for a kernel without sch_netem (tc answers "qdisc
/// kind is unknown" here): a TCP relay on 127.0.0.1 that hands each chunk on half a round trip after it arrived, in
/// each direction, and holds a new connection's first bytes one more round trip, as its TCP handshake would have
/// taken before the client could send them. Bandwidth and loss are not modelled.
public final class DelayingRelay: @unchecked Sendable {
    public let port: Int
    private let listener: Int32
    private let upstreamPort: Int
    private let roundTrip = Atomic<Int>(0)
    private let running = Atomic<Bool>(true)

    public init(to upstreamPort: Int) throws {
        self.upstreamPort = upstreamPort
        (listener, port) = try LoopbackSocket.listen()
        Thread.detachNewThread { [self] in accept() }
    }

    /// The round trip the relay adds from now on (each new connection reads it once).
    public var roundTripMilliseconds: Int {
        get { roundTrip.load(ordering: .relaxed) }
        set { roundTrip.store(newValue, ordering: .relaxed) }
    }

    public func stop() {
        running.store(false, ordering: .relaxed)
        shutdown(listener, Int32(SHUT_RDWR))
    }

    deinit { stop() }

    private func accept() {
        defer { close(listener) }
        while running.load(ordering: .relaxed) {
            let client = Glibc.accept(listener, nil, nil)
            guard client >= 0 else { continue }
            guard let server = LoopbackSocket.connect(upstreamPort) else {
                close(client)
                continue
            }
            for fd in [client, server] {
                var on: Int32 = 1
                setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
            }
            let oneWay = Double(roundTripMilliseconds) / 2000
            let closing = Atomic<Int>(0)
            for (from, to, handshake) in [(client, server, 2 * oneWay), (server, client, 0)] {
                Thread.detachNewThread {
                    Self.pump(from: from, to: to, delay: oneWay, firstExtra: handshake)
                    // The second direction to end closes both sockets.
                    if closing.add(1, ordering: .relaxed).newValue == 2 {
                        close(client)
                        close(server)
                    } else {
                        shutdown(to, Int32(SHUT_WR))
                    }
                }
            }
        }
    }

    /// Reads chunks from `from` as they arrive and writes each to `to` `delay` seconds after it arrived, in order;
    /// the first chunk waits `firstExtra` more. A writer thread keeps the reads on time while earlier chunks wait.
    private static func pump(from: Int32, to: Int32, delay: Double, firstExtra: Double) {
        let queue = ChunkQueue()
        let written = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            defer { written.signal() }
            while let (due, bytes) = queue.next() {
                let wait = due.timeIntervalSinceNow
                if wait > 0 { Thread.sleep(forTimeInterval: wait) }
                var sent = 0
                while sent < bytes.count {
                    let n = bytes.withUnsafeBytes {
                        send(to, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
                    }
                    guard n > 0 else { return }
                    sent += n
                }
            }
        }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var extra = firstExtra
        while true {
            let count = recv(from, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            queue.add(Array(buffer[..<count]), due: Date().addingTimeInterval(delay + extra))
            extra = 0
        }
        queue.end()
        written.wait()
    }
}

/// The chunks one direction holds back, in arrival order.
private final class ChunkQueue: @unchecked Sendable {
    private let condition = NSCondition()
    private var chunks: [(due: Date, bytes: [UInt8])] = []
    private var ended = false

    func add(_ bytes: [UInt8], due: Date) {
        condition.withLock {
            chunks.append((due, bytes))
            condition.signal()
        }
    }

    func end() {
        condition.withLock {
            ended = true
            condition.signal()
        }
    }

    /// The next chunk, waiting for one; nil once the reader ended and all were taken.
    func next() -> (due: Date, bytes: [UInt8])? {
        condition.withLock {
            while chunks.isEmpty && !ended { condition.wait() }
            return chunks.isEmpty ? nil : chunks.removeFirst()
        }
    }
}
