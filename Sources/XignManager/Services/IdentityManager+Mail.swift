import Foundation
import NIOPosix
import ServiceLifecycle
import XignCrypto

/// Mail: queued as a row in the transaction that causes it, so no account exists without its mail and no mail
/// without its account. Whichever instance claims the row first sends it: once, or twice if an instance dies
/// between sending and deleting the row, but never not at all.
extension IdentityManager {
    /// How long a claim on a queued mail holds, which is also the pause before a failed one is tried again: longer than
    /// the relay's timeouts for one message, or than writing one file into the maildir. A claim of an instance that
    /// died runs out after this; a maildir delivery that happens twice writes the same file twice.
    var mailClaimMilliseconds: Int64 { configuration.smtpRelay == nil ? 5_000 : 120_000 }

    /// Queues `mail` in the caller's transaction; returns its id for `deliverMail(id:)` once that committed.
    func queue(_ mail: Outbox.Mail, in store: ManagerStore) async throws -> String {
        let id = try SecureRandom.identifier()
        // Sealed at rest: an activation mail holds the activation secret until it is sent, and is deleted then.
        let message = try sealedForQueue(Outbox.message(mail, from: configuration.mailFrom, id: id))
        try await store.queueMail(id: id, recipient: mail.to, message: message, now: Self.now())
        return id
    }

    /// Called after the queuing transaction committed. Without a relay the mail goes into the maildir before the
    /// answer; with one, the relay loop is woken and the answer does not wait for SMTP.
    func deliverMail(id: String) async {
        guard configuration.smtpRelay == nil else {
            mailQueued.yield()
            return
        }
        do { _ = try await deliverDueMail(id: id) } catch {
            logger.warning("mail stays queued: \(error)")
        }
    }

    /// Claims and delivers queued mail (one message when `id` is given, else all that is due). Returns how many were sent.
    func deliverDueMail(id: String? = nil) async throws -> Int {
        let relay = try configuration.smtpRelay.map(SMTPRelay.init)
        var sent = 0
        while true {
            let now = Self.now()
            guard
                let mail = try await database.transaction({ store in
                    try await store.claimMail(id: id, now: now, until: now + self.mailClaimMilliseconds)
                })
            else { return sent }
            let outbox = self.outbox, sender = configuration.mailFrom
            let message = try openedFromQueue(mail.message)
            try await NIOThreadPool.singleton.runIfActive {
                if let relay {
                    try relay.send(message: message, from: sender, to: mail.recipient)
                } else {
                    try outbox.deliver(message: message, id: mail.id, createdAt: mail.createdAt)
                }
            }
            try await database.transaction { store in try await store.deleteMail(id: mail.id) }
            sent += 1
            if id != nil { return sent }
        }
    }

    /// Delivers what is due: at start, whenever mail was queued, and after each claim period for mail that a failed
    /// round or an instance that died left behind. Runs until cancelled.
    public func relayMail() async {
        let interval = Duration.milliseconds(mailClaimMilliseconds)
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                while !Task.isCancelled {
                    self.mailQueued.yield()
                    try? await Task.sleep(for: interval)
                }
            }
            group.addTask {
                for await _ in self.mailQueue {
                    do {
                        let sent = try await self.deliverDueMail()
                        if sent > 0 {
                            self.logger.info(
                                "mail delivered",
                                metadata: ["count": "\(sent)", "relay": "\(self.configuration.smtpRelay ?? "maildir")"])
                        }
                    } catch {
                        self.logger.warning(
                            "mail stays queued, next try in \(self.mailClaimMilliseconds / 1000) s: \(error)")
                    }
                }
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// For `xign-manager admin`, which runs no relay loop: delivers what is due now, or says why it waits.
    public func sendQueuedMailNow() async {
        do { _ = try await deliverDueMail() } catch {
            FileHandle.standardError.write(
                Data("The mail stays queued (\(error)); the running manager sends it once the relay answers.\n".utf8))
        }
    }

    public struct QueuedMailSummary: Sendable {
        public var recipient: String
        public var queuedAt: Int64
        public var attempts: Int
    }

    public func queuedMail() async throws -> [QueuedMailSummary] {
        try await database.transaction { store in try await store.queuedMail() }
            .map { QueuedMailSummary(recipient: $0.recipient, queuedAt: $0.createdAt, attempts: $0.attempts) }
    }
}

/// The mail relay as a service of the application, so it starts and stops with the server.
struct MailRelayService: Service {
    let manager: IdentityManager

    func run() async throws {
        await cancelWhenGracefulShutdown { await manager.relayMail() }
    }
}
