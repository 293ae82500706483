import Foundation
import ServiceLifecycle

/// Mail: queued durably in the outbox, then fed to the SMTP relay when one is configured.
extension IdentityManager {
    /// Queues mail in the outbox (durable), then wakes the SMTP relay if one runs.
    func send(_ mail: Outbox.Mail) throws {
        try outbox.deliver(mail, from: configuration.mailFrom)
        mailQueued.yield()
    }

    /// Feeds the outbox to the configured SMTP relay: at start, whenever mail is queued, and every
    /// `interval` for mail a failed round left behind. Returns at once without a relay; runs until cancelled.
    public func relayMail(every interval: Duration = .seconds(30)) async {
        guard let relayAddress = configuration.smtpRelay, let relay = try? SMTPRelay(relayAddress) else { return }
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
                        let sent = try await self.outbox.flush(through: relay, from: self.configuration.mailFrom)
                        if sent > 0 { self.logger.info("mail relayed", metadata: ["count": "\(sent)", "relay": "\(relayAddress)"]) }
                    } catch {
                        self.logger.warning("mail stays in the outbox: \(error)")
                    }
                }
            }
            await group.next()
            group.cancelAll()
        }
    }

    public func pendingMail() throws -> [String] { try outbox.pending() }
}

/// The mail relay as a service of the application, so it starts and stops with the server.
struct MailRelayService: Service {
    let manager: IdentityManager

    func run() async throws {
        await cancelWhenGracefulShutdown { await manager.relayMail() }
        // Without a relay there is nothing to do; a service that returned would stop the whole application.
        try? await gracefulShutdown()
    }
}
