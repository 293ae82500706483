import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A minimal SMTP server on 127.0.0.1 that accepts every message and keeps it, undoing dot-stuffing.
public final class SMTPSink: @unchecked Sendable {
    public let port: Int
    private let socket: Int32
    private let lock = NSLock()
    private var _messages: [(recipient: String, data: String)] = []

    public init() throws {
        let (fd, bound) = try LoopbackSocket.listen()
        socket = fd
        port = bound
        // Serves until the test process ends; each test makes its own sink.
        Thread.detachNewThread { self.serve() }
    }

    public var messages: [(recipient: String, data: String)] { lock.withLock { _messages } }

    private func serve() {
        while true {
            let client = accept(socket, nil, nil)
            if client < 0 { return }
            converse(client)
            close(client)
        }
    }

    private func converse(_ client: Int32) {
        var pending = [UInt8]()
        func say(_ line: String) {
            _ = Array((line + "\r\n").utf8).withUnsafeBytes {
                send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
        }
        func line() -> String? {
            while true {
                if let end = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let text = String(decoding: pending[..<end], as: UTF8.self).trimmingCharacters(
                        in: CharacterSet(charactersIn: "\r"))
                    pending.removeSubrange(...end)
                    return text
                }
                var chunk = [UInt8](repeating: 0, count: 1024)
                let n = recv(client, &chunk, chunk.count, 0)
                if n <= 0 { return nil }
                pending += chunk.prefix(n)
            }
        }
        say("220 sink ESMTP")
        var recipient = ""
        while let command = line() {
            let verb = command.prefix(4).uppercased()
            switch verb {
            case "EHLO", "HELO": say("250-sink\r\n250 8BITMIME")
            case "MAIL": say("250 ok")
            case "RCPT":
                recipient = command.components(separatedBy: "<").last?.components(separatedBy: ">").first ?? ""
                say("250 ok")
            case "DATA":
                say("354 go on")
                var data: [String] = []
                while let text = line(), text != "." {
                    data.append(text.hasPrefix("..") ? String(text.dropFirst()) : text)
                }
                lock.withLock { _messages.append((recipient, data.joined(separator: "\r\n"))) }
                say("250 queued")
            case "QUIT":
                say("221 bye")
                return
            default: say("502 no")
            }
        }
    }
}
