import Foundation
import Testing
import XignProtocol
import XignTestSupport

@Suite struct MailRelayTests {
    @Test func activationMailGoesThroughTheRelayAndLeavesTheQueue() async throws {
        let sink = try SMTPSink()
        let config =
            ManagerFiles.testConfig + "\n[mail]\nsmtp_relay = 127.0.0.1:\(sink.port)\nfrom = idm@example.org\n"
        try await InProcessManager.run(config: config) { inProcess in
            let manager = inProcess.files
            _ = try await inProcess.api.postRegistration("relay@example.org")
            #expect(try await pollUntil { sink.messages.count == 1 })
            let message = try #require(sink.messages.first)
            #expect(message.recipient == "relay@example.org")
            #expect(try PersonalizationPayload(parsingMail: message.data).managerURL == inProcess.api.url)
            // Relayed mail leaves the queue and never lands in the maildir.
            #expect(try await pollUntil { try manager.query("SELECT COUNT(*) FROM mail_queue") == ["0"] })
            #expect(try manager.mails().isEmpty)
        }
    }

    @Test(.machineShare) func mailWaitsInTheOutboxWhileTheRelayIsDown() async throws {
        // A port nobody listens on: the registration still succeeds and the mail stays queued.
        let port = try LoopbackSocket.unusedPort()
        let manager = try ManagerProcess(
            config: ManagerProcess.testConfig + "\n[mail]\nsmtp_relay = 127.0.0.1:\(port)\n")
        let answer = try await API(manager: manager).postRegistration("queued@example.org")
        #expect(answer.status == 201)
        #expect(waitUntil { manager.log.contains("mail stays queued") }, "the relay was tried")
        let queued = try manager.admin(["outbox"])
        #expect(queued.stdout.hasPrefix("queued@example.org\tqueued "), "\(queued.stdout)")
        #expect(queued.stdout.contains("1 attempt"))
        // At rest the queued mail is sealed: a copy of the database holds no activation secret and no link.
        let stored = try #require(try manager.query("SELECT message FROM mail_queue").first)
        #expect(
            stored.hasPrefix("sealed-v1:") && !stored.contains("personalize") && !stored.contains("queued@example.org"),
            "\(stored.prefix(80))")

        // The control: once the relay is up, the same row opens and goes out whole, and leaves the queue.
        let sink = try SMTPSink()
        manager.stop()
        _ = try manager.query("UPDATE mail_queue SET claimed_until = 0")  // as if the failed attempt's claim ran out
        try writeTestFile(
            manager.configPath,
            Data((ManagerProcess.testConfig + "\n[mail]\nsmtp_relay = 127.0.0.1:\(sink.port)\n").utf8))
        try manager.start()
        #expect(waitUntil { sink.messages.count == 1 }, "\(manager.log.suffix(500))")
        #expect(
            try sink.messages.first.map { try PersonalizationPayload(parsingMail: $0.data).managerURL } == manager.url)
        #expect(try waitUntil { try manager.query("SELECT COUNT(*) FROM mail_queue") == ["0"] })
    }
}
