import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A TCP responder on 127.0.0.1 that answers every request with bytes the test chooses.
///
/// It stands in for a manager misbehaving in ways the real one cannot be made to: truncated bodies,
/// oversized answers, forged signatures, replayed answers, or silence.
public final class FaultyServer: @unchecked Sendable {
    public let port: Int
    private let listener: Listener

    /// `respond` gets the request (headers and body) and returns the raw answer; nil means never answer.
    public init(respond: @escaping @Sendable (_ request: String) -> [UInt8]?) throws {
        let (fd, bound) = try LoopbackSocket.listen()
        port = bound
        listener = Listener(socket: fd, respond: respond)
        // The thread holds the listener, never the server: the server's deinit stops it, and what `respond`
        // captured (a fixture and its manager) goes with it.
        let thread = Thread { [listener] in listener.serve() }
        thread.start()
    }

    /// A stand-in that passes every request on to 127.0.0.1:`port`, holding back those that `match` for `seconds`.
    public static func delaying(
        _ seconds: Double, to port: Int, when match: @escaping @Sendable (_ request: String) -> Bool = { _ in true }
    ) throws -> FaultyServer {
        try FaultyServer { request in
            if match(request) { Thread.sleep(forTimeInterval: seconds) }
            return forward(request, toPort: port)
        }
    }

    public var requests: [String] { listener.requests }

    public var url: String { "http://127.0.0.1:\(port)" }

    public func stop() { listener.stop() }

    deinit { stop() }

    private final class Listener: @unchecked Sendable {
        private let socket: Int32
        private let respond: @Sendable (_ request: String) -> [UInt8]?
        private let lock = NSLock()
        private var _requests: [String] = []
        private var running = true

        init(socket: Int32, respond: @escaping @Sendable (_ request: String) -> [UInt8]?) {
            self.socket = socket
            self.respond = respond
        }

        var requests: [String] { lock.withLock { _requests } }

        /// Wakes the accepting thread, which closes the socket itself: closed here, its number could pass to another
        /// test's socket before the thread's next accept.
        func stop() {
            lock.withLock { running = false }
            shutdown(socket, Int32(SHUT_RDWR))
        }

        func serve() {
            defer { close(socket) }
            while lock.withLock({ running }) {
                let client = accept(socket, nil, nil)
                if client < 0 { continue }
                let request = readRequest(client)
                lock.withLock { _requests.append(request) }
                if let answer = respond(request) {
                    answer.withUnsafeBytes { _ = send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    close(client)
                } else {
                    // Hold the connection open and silent for a while.
                    let keep = client
                    Thread.detachNewThread {
                        sleep(30)
                        close(keep)
                    }
                }
            }
        }

        private func readRequest(_ client: Int32) -> String {
            var data = [UInt8]()
            var buffer = [UInt8](repeating: 0, count: 4096)
            var timeout = timeval(tv_sec: 2, tv_usec: 0)
            setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            while true {
                let n = recv(client, &buffer, buffer.count, 0)
                if n <= 0 { break }
                data += buffer.prefix(n)
                let text = String(decoding: data, as: UTF8.self)
                if let end = text.range(of: "\r\n\r\n") {
                    let headers = text[..<end.lowerBound].lowercased()
                    let length =
                        headers.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                        .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) }
                        ?? 0
                    if text.utf8.distance(from: end.upperBound, to: text.endIndex) >= length { break }
                }
            }
            return String(decoding: data, as: UTF8.self)
        }
    }

    /// Passes `request` on to the server on 127.0.0.1:`port` and returns its whole answer (nil if it gives none):
    /// a stand-in that forwards can delay, count or rewrite what the real manager says.
    public static func forward(_ request: String, toPort port: Int) -> [UInt8]? {
        guard let fd = LoopbackSocket.connect(port) else { return nil }
        defer { close(fd) }
        // One request per connection, as libcurl's easy calls here make them.
        let closing = request.replacingOccurrences(
            of: "\r\n\r\n", with: "\r\nConnection: close\r\n\r\n", options: [], range: request.range(of: "\r\n\r\n"))
        let bytes = Array(closing.utf8)
        guard bytes.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == bytes.count else {
            return nil
        }
        var answer = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { break }
            answer += buffer.prefix(n)
        }
        return answer.isEmpty ? nil : answer
    }

    /// An HTTP/1.1 answer with the given body; `declaredLength` lets a test lie about the length.
    public static func http(
        status: Int = 200, contentType: String = "application/json", body: [UInt8], declaredLength: Int? = nil
    ) -> [UInt8] {
        let head =
            "HTTP/1.1 \(status) X\r\nContent-Type: \(contentType)\r\nContent-Length: \(declaredLength ?? body.count)\r\nConnection: close\r\n\r\n"
        return Array(head.utf8) + body
    }
}
