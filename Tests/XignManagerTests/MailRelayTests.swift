import Foundation
import Testing
import XignProtocol
import XignTestSupport

@Suite struct MailRelayTests {
    @Test func activationMailGoesThroughTheRelayAndLeavesTheQueue() throws {
        let sink = try SMTPSink()
        let manager = try ManagerProcess(config: ManagerProcess.testConfig + "\n[mail]\nsmtp_relay = 127.0.0.1:\(sink.port)\nfrom = idm@example.org\n")
        _ = try API(manager: manager).post(APIPath.registrations, RegisterRequest(
            categoryId: "email", pin: "24680", attributes: ["email": "relay@example.org"], alias: nil, serviceMappingId: nil, arbitraryUserAttributes: nil))
        #expect(waitUntil { sink.messages.count == 1 })
        let message = try #require(sink.messages.first)
        #expect(message.recipient == "relay@example.org")
        #expect(try PersonalizationPayload(parsingMail: message.data).managerURL == manager.url)
        // Sent mail moves from new/ to cur/.
        #expect(try waitUntil { try manager.mails().isEmpty })
        #expect(try FileManager.default.contentsOfDirectory(atPath: manager.dataDirectory + "/outbox/cur").count == 1)
    }

    @Test func mailWaitsInTheOutboxWhileTheRelayIsDown() throws {
        // A port nobody listens on: the registration still succeeds and the mail stays queued.
        let port = try LoopbackSocket.unusedPort()
        let manager = try ManagerProcess(config: ManagerProcess.testConfig + "\n[mail]\nsmtp_relay = 127.0.0.1:\(port)\n")
        let answer = try API(manager: manager).post(APIPath.registrations, RegisterRequest(
            categoryId: "email", pin: "24680", attributes: ["email": "queued@example.org"], alias: nil, serviceMappingId: nil, arbitraryUserAttributes: nil))
        #expect(answer.status == 201)
        #expect(waitUntil { manager.log.contains("mail stays in the outbox") }, "the relay was tried")
        #expect(try manager.mails().count == 1)
    }
}
