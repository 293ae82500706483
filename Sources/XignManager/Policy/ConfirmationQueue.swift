import Foundation
import XignCrypto
import XignManagerConfiguration
import XignProtocol

/// The queue of an account's waiting logins: what a confirmation counts against, the room a new one gets, and the
/// code the host shows.
struct ConfirmationQueue: Sendable {
    let settings: ManagerConfiguration.Confirmation

    /// What a confirmation counts against: its host and the remote address the host reports (its /64 for IPv6).
    static func source(hostId: String, remoteHost: String?) -> String {
        hostId + " " + AddressKey.key(for: remoteHost ?? "-")
    }

    /// Keeps the account's queue within `max_pending` per source and `max_pending_per_account` in all: at a cap, the
    /// oldest pending confirmation nobody opened (of the source, or of the account) ends to make room, so whoever
    /// floods the queue cannot keep out the user's own next login. Returns the one that ended, if any.
    func makeRoom(
        for new: ManagerStore.ConfirmationRecord, of accountId: String, in store: ManagerStore
    ) async throws -> String? {
        let pending = try await store.pendingConfirmations(accountId: accountId, now: new.createdAt)
        let fromSource = pending.filter { $0.source == new.source }
        let candidates: [ManagerStore.ConfirmationRecord]
        if fromSource.count >= settings.maxPending {
            candidates = fromSource
        } else if pending.count >= settings.maxPendingPerAccount {
            candidates = pending
        } else {
            return nil
        }
        // Oldest first; one a device opened stays, as someone is deciding it.
        guard let oldest = candidates.first(where: { $0.openedAt == nil }),
            try await store.decideConfirmation(oldest.id, state: .expired, approvedBy: nil, now: new.createdAt)
        else {
            throw ManagerError(
                .tooManyRequests, .tooManyRequests,
                "\(candidates.count) logins to \(new.loginName) are waiting for approval and being decided; approve or deny those first"
            )
        }
        return oldest.id
    }

    /// Six digits, uniformly drawn.
    static func code() throws -> String {
        var value: UInt32
        repeat {
            value = try SecureRandom.bytes(4).withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
        } while value >= 4_293_000_000  // a multiple of 10^6, so every code is equally likely
        let digits = String(value % 1_000_000)
        return String(repeating: "0", count: 6 - digits.count) + digits
    }
}
