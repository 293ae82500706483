import Foundation
import Testing
import XignProtocol
import XignTestSupport

@Suite struct MailRelayTests {
    @Test func activationMailGoesThroughTheRelayAndLeavesTheQueue() throws {
        let sink = try SMTPSink()
        let manager = try ManagerProcess(
            config: ManagerProcess.testConfig + "\n[mail]\nsmtp_relay = 127.0.0.1:\(sink.port)\nfrom = idm@example.org\n")
        _ = try API(manager: manager).postRegistration("relay@example.org")
        #expect(waitUntil { sink.messages.count == 1 })
        let message = try #require(sink.messages.first)
        #expect(message.recipient == "relay@example.org")
        #expect(try PersonalizationPayload(parsingMail: message.data).managerURL == manager.url)
        // Relayed mail leaves the queue and never lands in the maildir.
        #expect(try waitUntil { try manager.query("SELECT COUNT(*) FROM mail_queue") == ["0"] })
        #expect(try manager.mails().isEmpty)
    }

    @Test func mailWaitsInTheOutboxWhileTheRelayIsDown() throws {
        // A port nobody listens on: the registration still succeeds and the mail stays queued.
        let port = try LoopbackSocket.unusedPort()
        let manager = try ManagerProcess(config: ManagerProcess.testConfig + "\n[mail]\nsmtp_relay = 127.0.0.1:\(port)\n")
        let answer = try API(manager: manager).postRegistration("queued@example.org")
        #expect(answer.status == 201)
        #expect(waitUntil { manager.log.contains("mail stays queued") }, "the relay was tried")
        let queued = try manager.admin(["outbox"])
        #expect(queued.stdout.hasPrefix("queued@example.org\tqueued "), "\(queued.stdout)")
        #expect(queued.stdout.contains("1 attempt"))
    }
}
