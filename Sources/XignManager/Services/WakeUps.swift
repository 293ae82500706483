import Foundation
import Logging

/// The long polls that wait on a confirmation or an account's pending logins, and what wakes them: here `Signals`, and
/// on PostgreSQL every instance through NOTIFY (the sweep in IdentityManager+WakeUps catches what is lost).
struct WakeUps: Sendable {
    let signals = Signals()
    let database: Database
    let logger: Logger

    /// What a host waiting for the confirmation `id` sleeps on.
    static func key(confirmation id: String) -> String { "confirmation:\(id)" }

    /// What the devices and browsers waiting for the account's pending logins sleep on.
    static func key(account accountId: String) -> String { "account:\(accountId)" }

    /// The keys a confirmation's change wakes: its host's wait and its account's approving devices.
    static func keys(confirmation id: String, account accountId: String) -> [String] {
        [key(confirmation: id), key(account: accountId)]
    }

    /// Wakes the waiters of `keys` here and, on PostgreSQL, on every instance. Called after the change committed.
    func wake(_ keys: [String]) async {
        keys.forEach(signals.signal)
        do { try await database.publish(keys) } catch {
            logger.warning("cannot notify the other instances (their waiters see it at the next sweep): \(error)")
        }
    }

    /// The account's pending confirmations, oldest first, once `done` holds for them or after `waitMilliseconds`.
    func waitForPendingConfirmations(
        of accountId: String, upTo waitMilliseconds: Int, until done: ([ManagerStore.ConfirmationRecord]) -> Bool
    ) async throws -> [ManagerStore.ConfirmationRecord] {
        let keptUntil = { (pending: [ManagerStore.ConfirmationRecord]) in
            pending.map(\.expiresAt).min() ?? IdentityManager.now() + IdentityManager.emptyListKeptMilliseconds
        }
        return try await longPoll(
            waitMilliseconds, wakingOn: WakeUps.key(account: accountId), keptUntil: keptUntil, until: done
        ) {
            try await database.read { store in
                try await store.pendingConfirmations(accountId: accountId, now: IdentityManager.now())
            }
        }.filter { $0.state(at: IdentityManager.now()) == .pending }
    }

    /// Waits until `done` holds or `waitMilliseconds` (at most 25 s) have passed, and returns the last reading. The
    /// reading is kept (Signals) until `keptUntil` or a wake-up on `key`, so a wait that comes again, here or for
    /// another waiter of the same key, costs the database nothing until the row changes.
    func longPoll<Reading: Sendable>(
        _ waitMilliseconds: Int, wakingOn key: String, keptUntil: @escaping (Reading) -> Int64,
        until done: (Reading) -> Bool,
        _ read: () async throws -> Reading
    ) async throws -> Reading {
        let deadline =
            IdentityManager.now() + Int64(min(max(waitMilliseconds, 0), IdentityManager.longestWaitMilliseconds))
        while true {
            let reading = try await signals.reading(of: key, now: IdentityManager.now(), until: keptUntil, read)
            let now = IdentityManager.now()
            if done(reading.value) || now >= deadline { return reading.value }
            await signals.pause(
                key, upTo: .milliseconds(max(1, min(deadline, keptUntil(reading.value)) - now)),
                whileKept: reading.token)
        }
    }
}
