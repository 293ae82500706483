import Foundation
import NIOPosix
import XignManagerConfiguration

/// Hands mail from the outbox to an SMTP relay (plain SMTP, for a relay on this host or a trusted network).
///
/// Blocking sockets with hard timeouts, run on NIO's thread pool so no event loop waits.
struct SMTPRelay: Sendable {
    let host: String
    let port: Int
    var timeoutSeconds = 10

    init(_ relay: String) throws {
        guard let (host, port) = ManagerConfiguration.relayAddress(relay) else {
            throw ManagerError.internalFailure("mail.smtp_relay must be HOST:PORT, not '\(relay)'")
        }
        (self.host, self.port) = (host, port)
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Sends one RFC 5322 message to `recipient`.
    func send(message: String, from sender: String, to recipient: String) throws {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &found) == 0, let address = found else {
            throw Failure(description: "cannot resolve SMTP relay \(host)")
        }
        defer { freeaddrinfo(found) }
        let fd = socket(address.pointee.ai_family, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        // On Linux SO_SNDTIMEO also bounds connect().
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard connect(fd, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 else {
            throw Failure(
                description: "cannot connect to SMTP relay \(host):\(port): \(String(cString: strerror(errno)))")
        }
        var conversation = Conversation(fd: fd)
        try conversation.expect(220)
        try conversation.command("EHLO xign-manager", expect: 250)
        try conversation.command("MAIL FROM:<\(sender)>", expect: 250)
        try conversation.command("RCPT TO:<\(recipient)>", expect: 250)
        try conversation.command("DATA", expect: 354)
        // Dot-stuffing (RFC 5321 §4.5.2), CRLF line ends, then the lone dot.
        let lines = message.replacingOccurrences(of: "\r\n", with: "\n").split(
            separator: "\n", omittingEmptySubsequences: false)
        let body = lines.map { $0.hasPrefix(".") ? "." + $0 : String($0) }.joined(separator: "\r\n")
        try conversation.command(body + "\r\n.", expect: 250)
        try? conversation.command("QUIT", expect: 221)
    }

    private struct Conversation {
        let fd: Int32
        var buffer: [UInt8] = []

        mutating func command(_ line: String, expect code: Int) throws {
            var bytes = Array((line + "\r\n").utf8)[...]
            while !bytes.isEmpty {
                let n = bytes.withUnsafeBytes { Foundation.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard n > 0 else { throw Failure(description: "SMTP relay closed the connection") }
                bytes = bytes.dropFirst(n)
            }
            try expect(code)
        }

        /// Reads one (possibly multi-line) reply and checks its code.
        mutating func expect(_ code: Int) throws {
            while true {
                let line = try readLine()
                guard line.count >= 3, let got = Int(line.prefix(3)) else {
                    throw Failure(description: "SMTP relay sent '\(line.prefix(80))'")
                }
                if line.count > 3 && line[line.index(line.startIndex, offsetBy: 3)] == "-" { continue }
                guard got == code else {
                    throw Failure(description: "SMTP relay answered '\(line.prefix(120))', expected \(code)")
                }
                return
            }
        }

        mutating func readLine() throws -> String {
            while true {
                if let end = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: buffer[..<end], as: UTF8.self).trimmingCharacters(in: .newlines)
                    buffer.removeSubrange(...end)
                    return line
                }
                guard buffer.count < 4096 else { throw Failure(description: "SMTP relay sent an overlong line") }
                var chunk = [UInt8](repeating: 0, count: 1024)
                let n = recv(fd, &chunk, chunk.count, 0)
                guard n > 0 else { throw Failure(description: "SMTP relay did not answer in time") }
                buffer += chunk.prefix(n)
            }
        }
    }
}
