import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing
import XignProtocol
import XignTestSupport

@Suite struct MailRelayTests {
    func waitFor(_ condition: () throws -> Bool, seconds: Double = 10) rethrows -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try condition() { return true }
            usleep(20_000)
        }
        return try condition()
    }

    @Test func activationMailGoesThroughTheRelayAndLeavesTheQueue() throws {
        let sink = try SMTPSink()
        let manager = try ManagerProcess(config: ManagerProcess.testConfig + "\n[mail]\nsmtp_relay = 127.0.0.1:\(sink.port)\nfrom = idm@example.org\n")
        _ = try API(manager: manager).post(APIPath.registrations, RegisterRequest(
            categoryId: "email", pin: "24680", attributes: ["email": "relay@example.org"], alias: nil, serviceMappingId: nil, arbitraryUserAttributes: nil))
        #expect(waitFor { sink.messages.count == 1 })
        let message = try #require(sink.messages.first)
        #expect(message.recipient == "relay@example.org")
        #expect(try PersonalizationPayload(parsingMail: message.data).managerURL == manager.url)
        // Sent mail moves from new/ to cur/.
        #expect(try waitFor { try manager.mails().isEmpty })
        #expect(try FileManager.default.contentsOfDirectory(atPath: manager.dataDirectory + "/outbox/cur").count == 1)
    }

    @Test func mailWaitsInTheOutboxWhileTheRelayIsDown() throws {
        // A port nobody listens on: the registration still succeeds and the mail stays queued.
        let port = try unusedPort()
        let manager = try ManagerProcess(config: ManagerProcess.testConfig + "\n[mail]\nsmtp_relay = 127.0.0.1:\(port)\n")
        let answer = try API(manager: manager).post(APIPath.registrations, RegisterRequest(
            categoryId: "email", pin: "24680", attributes: ["email": "queued@example.org"], alias: nil, serviceMappingId: nil, arbitraryUserAttributes: nil))
        #expect(answer.status == 201)
        #expect(waitFor { manager.log.contains("mail stays in the outbox") }, "the relay was tried")
        #expect(try manager.mails().count == 1)
    }

    /// A loopback port that was free a moment ago and has no listener.
    func unusedPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard ok else { throw TestFailure("cannot find a free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
