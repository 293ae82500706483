import Foundation
import Logging
import ServiceLifecycle
import XignManagerConfiguration

/// The deletion of rows that ran out, in every instance; the deletes are idempotent, so instances need not take turns.
struct Expiry: Sendable {
    let database: Database
    let configuration: ManagerConfiguration

    /// Deletes what ran out more than `storage.keep_expired` ago; returns the rows deleted per table. A batch of
    /// `purgeBatch` rows per transaction, so a flood of expired rows never holds the writer from a PIN check long.
    @discardableResult
    func purgeExpired() async throws -> [String: Int] {
        let now = IdentityManager.now()
        let cutoff = now - configuration.keepExpiredMilliseconds,
            windowCutoff = now - configuration.limits.windowMilliseconds
        let auditCutoff = now - configuration.auditKeepMilliseconds
        var deleted: [String: Int] = [:]
        for purge in ManagerStore.Purge.allCases {
            while true {
                let count = try await database.transaction(durability: .unsynced) { store in
                    try await store.purge(
                        purge, before: cutoff, windowsBefore: windowCutoff, auditBefore: auditCutoff,
                        limit: Self.purgeBatch)
                }
                if count > 0 { deleted[purge.rawValue, default: 0] += count }
                if count < Self.purgeBatch { break }
                await Task.yield()
            }
        }
        return deleted
    }

    static let purgeBatch = 500

    /// Half of `keep_expired`, between 1 s and a minute.
    var purgeInterval: Duration { .milliseconds(min(max(configuration.keepExpiredMilliseconds / 2, 1_000), 60_000)) }
}

/// Runs `Expiry.purgeExpired` every `purgeInterval`.
struct ExpiryService: Service {
    let manager: IdentityManager

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try? await Task.sleep(for: manager.expiry.purgeInterval)
                do {
                    let deleted = try await manager.expiry.purgeExpired()
                    if !deleted.isEmpty {
                        manager.logger.debug(
                            "expired rows deleted", metadata: deleted.mapValues { .stringConvertible($0) })
                    }
                } catch is CancellationError {
                    return
                } catch {
                    manager.logger.warning("cannot delete expired rows: \(error)")
                }
            }
        }
    }
}
