import Foundation
import Logging
import NIOPosix
import ServiceLifecycle
import XignCrypto
import XignManagerConfiguration

/// Mail: queued as a row in the transaction that causes it, so no account exists without its mail and no mail
/// without its account. Whichever instance claims the row first sends it: once, or twice if an instance dies
/// between sending and deleting the row, but never not at all. Queued mail is sealed under the record key: an
/// activation mail holds the activation secret until it is sent.
public struct MailQueue: Sendable {
    let database: Database
    let configuration: ManagerConfiguration
    let outbox: Outbox
    let recordKey: Data
    let logger: Logger
    /// Wakes the relay loop when mail was queued.
    private let queuedSignal: AsyncStream<Void>.Continuation
    private let queuedStream: AsyncStream<Void>

    init(database: Database, configuration: ManagerConfiguration, recordKey: Data, logger: Logger) {
        self.database = database
        self.configuration = configuration
        outbox = Outbox(path: configuration.outboxPath)
        self.recordKey = recordKey
        self.logger = logger
        (queuedStream, queuedSignal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// How long a claim on a queued mail holds, which is also the pause before a failed one is tried again: longer than
    /// the relay's timeouts for one message, or than writing one file into the maildir. A claim of an instance that
    /// died runs out after this; a maildir delivery that happens twice writes the same file twice.
    var claimMilliseconds: Int64 { configuration.smtpRelay == nil ? 5_000 : 120_000 }

    /// Queues `mail` in the caller's transaction; returns its id for `deliverMail(id:)` once that committed.
    func queue(_ mail: Outbox.Mail, in store: ManagerStore) async throws -> String {
        let id = try SecureRandom.identifier()
        // Sealed at rest: an activation mail holds the activation secret until it is sent, and is deleted then.
        let message = try sealedForQueue(Outbox.message(mail, from: configuration.mailFrom, id: id))
        try await store.queueMail(id: id, recipient: mail.to, message: message, now: IdentityManager.now())
        return id
    }

    /// Called after the queuing transaction committed. Without a relay the mail goes into the maildir before the
    /// answer; with one, the relay loop is woken and the answer does not wait for SMTP.
    func deliver(id: String) async {
        guard configuration.smtpRelay == nil else {
            queuedSignal.yield()
            return
        }
        do { _ = try await deliverDue(id: id) } catch {
            logger.warning("mail stays queued: \(error)")
        }
    }

    /// Claims and delivers queued mail (one message when `id` is given, else all that is due). Returns how many were sent.
    func deliverDue(id: String? = nil) async throws -> Int {
        let relay = try configuration.smtpRelay.map(SMTPRelay.init)
        var sent = 0
        while true {
            let now = IdentityManager.now()
            // Into the maildir, the request that queued a mail delivers it before its answer: a sweep leaves it that
            // long, or the answer could come before the file (the sweep holding the claim). Through a relay the loop
            // sends everything at once.
            let queuedBefore = relay == nil ? now - claimMilliseconds : now + 1
            guard
                let mail = try await database.transaction({ store in
                    try await store.claimMail(
                        id: id, now: now, until: now + self.claimMilliseconds, queuedBefore: queuedBefore)
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
    func relay() async {
        let interval = Duration.milliseconds(claimMilliseconds)
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                while !Task.isCancelled {
                    self.queuedSignal.yield()
                    try? await Task.sleep(for: interval)
                }
            }
            group.addTask {
                for await _ in self.queuedStream {
                    do {
                        let sent = try await self.deliverDue()
                        if sent > 0 {
                            self.logger.info(
                                "mail delivered",
                                metadata: ["count": "\(sent)", "relay": "\(self.configuration.smtpRelay ?? "maildir")"])
                        }
                    } catch {
                        self.logger.warning(
                            "mail stays queued, next try in \(self.claimMilliseconds / 1000) s: \(error)")
                    }
                }
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// For `xign-manager admin`, which runs no relay loop: delivers what is due now, or says why it waits.
    public func sendNow() async {
        do { _ = try await deliverDue() } catch {
            FileHandle.standardError.write(
                Data("The mail stays queued (\(error)); the running manager sends it once the relay answers.\n".utf8))
        }
    }

    public struct QueuedMailSummary: Sendable {
        public var recipient: String
        public var queuedAt: Int64
        public var attempts: Int
    }

    public func queued() async throws -> [QueuedMailSummary] {
        try await database.transaction { store in try await store.queuedMail() }
            .map { QueuedMailSummary(recipient: $0.recipient, queuedAt: $0.createdAt, attempts: $0.attempts) }
    }

    private static let sealedPrefix = "sealed-v1:"

    /// `message` as the mail queue keeps it.
    func sealedForQueue(_ message: String) throws -> String {
        Self.sealedPrefix + Base64URL.encode(try SecretBox.seal(Data(message.utf8), key: recordKey))
    }

    /// A queued message as it goes out. Rows queued before sealing existed are taken as they are.
    func openedFromQueue(_ stored: String) throws -> String {
        guard stored.hasPrefix(Self.sealedPrefix) else { return stored }
        guard let box = Base64URL.decode(String(stored.dropFirst(Self.sealedPrefix.count))),
            let opened = try? SecretBox.open(box, key: recordKey), let message = String(bytes: opened, encoding: .utf8)
        else {
            throw ManagerError.internalFailure(
                "a queued mail does not open with this manager's signing key; it was queued under another one, which must be restored to send it"
            )
        }
        return message
    }
}

/// The mail relay as a service of the application, so it starts and stops with the server.
struct MailRelayService: Service {
    let manager: IdentityManager

    func run() async throws {
        await cancelWhenGracefulShutdown { await manager.mail.relay() }
    }
}
