import Foundation
import Logging

/// Wakes the long polls that wait on a confirmation or an account's pending logins: here through `Signals`, and on
/// PostgreSQL on every instance through NOTIFY (the sweep in IdentityManager+WakeUps catches what is lost).
struct WakeUps: Sendable {
    let signals: Signals
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
}
