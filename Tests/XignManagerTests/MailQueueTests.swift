import Foundation
import Logging
import Testing
import XignCrypto
import XignTestSupport

@testable import XignManager

/// Mail queued with the transaction that causes it, sealed while it waits, delivered once into the maildir.
@Suite struct MailQueueTests {
    static let secret = "ACTIVATION-SECRET-7Q2F"
    static let mail = Outbox.Mail(to: "alice@example.org", subject: "Your activation", body: "Secret: \(secret)\n")

    @Test func queuedMailIsSealedAtRestAndDeliveredOnceIntoTheMaildir() async throws {
        try await ManagerBlocks.with { blocks in
            let queue = blocks.manager.mail
            let id = try await blocks.write { try await queue.queue(Self.mail, in: $0) }
            #expect(!blocks.databaseFilesHold(Self.secret), "sealed in the database")
            #expect(try await queue.queued().map(\.recipient) == ["alice@example.org"])

            await queue.deliver(id: id)
            let delivered = try blocks.deliveredMail()
            #expect(
                delivered.count == 1 && delivered[0].contains(Self.secret)
                    && delivered[0].contains("To: alice@example.org"))
            #expect(try await queue.queued().isEmpty)
            #expect(try await queue.deliverDue() == 0, "sent once")
            #expect(try blocks.deliveredMail().count == 1)
        }
    }

    /// No account without its mail and no mail without its account: a queuing transaction that rolls back leaves none.
    @Test func mailOfATransactionThatRollsBackIsNeverSent() async throws {
        try await ManagerBlocks.with { blocks in
            let queue = blocks.manager.mail
            await #expect(throws: Abandoned.self) {
                try await blocks.write { store -> Void in
                    _ = try await queue.queue(Self.mail, in: store)
                    throw Abandoned()
                }
            }
            let (queued, sent, delivered) = (
                try await queue.queued(), try await queue.deliverDue(), try blocks.deliveredMail()
            )
            #expect(queued.isEmpty && sent == 0 && delivered.isEmpty)
        }
    }

    /// A queued message opens only with the record key it was sealed with; a row from before sealing goes as it is.
    @Test func aQueuedMessageOpensOnlyWithItsKey() async throws {
        try await ManagerBlocks.with { blocks in
            let queue = blocks.manager.mail
            let sealed = try queue.sealedForQueue("Secret: \(Self.secret)")
            #expect(try queue.openedFromQueue(sealed) == "Secret: \(Self.secret)")
            let otherKey = MailQueue(
                database: blocks.manager.database, configuration: blocks.manager.configuration,
                recordKey: try SecureRandom.bytes(32), logger: Logger(label: "test"))
            let refused = #expect(throws: ManagerError.self) { try otherKey.openedFromQueue(sealed) }
            #expect(refused?.description.contains("queued under another one") == true)
            #expect(try otherKey.openedFromQueue("Subject: plain") == "Subject: plain")
        }
    }
}

/// Thrown to roll a transaction back.
private struct Abandoned: Error {}
