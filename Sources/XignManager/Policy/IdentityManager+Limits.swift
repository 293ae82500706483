import Foundation
import Hummingbird
import ServiceLifecycle
import XignManagerConfiguration

/// What keeps the manager usable under load and abuse: rate limits on the unauthenticated routes that cost a PIN
/// hash or a mail, and the deletion of rows that ran out. Both live in the database, so they hold across instances.
extension IdentityManager {
    enum RateLimit: String {
        case registrationsPerAddress = "registration-address"
        case registrationsPerEmail = "registration-email"
        case decryptsPerAddress = "decrypt-address"
        case startsPerDevice = "start-device"
        case viewsPerAddress = "view-address"

        func limit(_ limits: ManagerConfiguration.Limits) -> Int {
            switch self {
            case .registrationsPerAddress: limits.registrationsPerAddress
            case .registrationsPerEmail: limits.registrationsPerEmail
            case .decryptsPerAddress: limits.decryptsPerAddress
            case .startsPerDevice: limits.startsPerDevice
            case .viewsPerAddress: limits.viewsPerAddress
            }
        }
    }

    /// One counted use of a limit, and when its window ends.
    struct RateLimitUse: Sendable {
        var limit: RateLimit
        var uses: Int
        var retryAfterMilliseconds: Int64
    }

    /// Counts one use of `limit` by `key` in the current window; past the limit the answer is 429 with Retry-After.
    /// Keys are stored hashed, so the table holds no addresses.
    func charge(_ limit: RateLimit, key: String) async throws {
        try enforce(try await database.transaction { store in try await self.countUse(limit, key: key, in: store) })
    }

    /// The count of `charge` inside the caller's transaction, so it commits with the caller's own writes; `enforce` the
    /// result once that transaction committed, so a refusal still counts.
    func countUse(_ limit: RateLimit, key: String, in store: ManagerStore) async throws -> RateLimitUse {
        let window = configuration.limits.windowMilliseconds
        let now = Self.now()
        let windowStart = now - now % window
        let uses = try await store.countUse(of: "\(limit.rawValue):\(Self.hashed(key))", windowStart: windowStart)
        return RateLimitUse(limit: limit, uses: uses, retryAfterMilliseconds: windowStart + window - now)
    }

    func enforce(_ use: RateLimitUse) throws {
        guard use.uses <= use.limit.limit(configuration.limits) else {
            logger.notice("rate limit reached", metadata: ["limit": "\(use.limit.rawValue)", "uses": "\(use.uses)"])
            throw ManagerError.tooManyRequests(retryAfterMilliseconds: use.retryAfterMilliseconds)
        }
    }

    /// Deletes what ran out more than `storage.keep_expired` ago; returns the rows deleted per table. A batch of
    /// `purgeBatch` rows per transaction, so a flood of expired rows never holds the writer from a PIN check long.
    @discardableResult
    public func purgeExpired() async throws -> [String: Int] {
        let now = Self.now()
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

/// Runs `purgeExpired` in every instance; the deletes are idempotent, so instances need not take turns.
struct ExpiryService: Service {
    let manager: IdentityManager

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try? await Task.sleep(for: manager.purgeInterval)
                do {
                    let deleted = try await manager.purgeExpired()
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
