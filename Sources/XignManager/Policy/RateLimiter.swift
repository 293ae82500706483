import Foundation
import Logging
import XignManagerConfiguration

/// Rate limits on the unauthenticated routes that cost a PIN hash or a mail. Counted in the database, so they hold
/// across instances.
struct RateLimiter: Sendable {
    let database: Database
    let limits: ManagerConfiguration.Limits
    let logger: Logger

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
        let window = limits.windowMilliseconds
        let now = IdentityManager.now()
        let windowStart = now - now % window
        let uses = try await store.countUse(
            of: "\(limit.rawValue):\(IdentityManager.hashed(key))", windowStart: windowStart)
        return RateLimitUse(limit: limit, uses: uses, retryAfterMilliseconds: windowStart + window - now)
    }

    func enforce(_ use: RateLimitUse) throws {
        guard use.uses <= use.limit.limit(limits) else {
            logger.notice("rate limit reached", metadata: ["limit": "\(use.limit.rawValue)", "uses": "\(use.uses)"])
            throw ManagerError.tooManyRequests(retryAfterMilliseconds: use.retryAfterMilliseconds)
        }
    }
}
