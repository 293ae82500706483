import Foundation
import Logging
import Testing
import XignManagerConfiguration
import XignTestSupport

@testable import XignManager

/// The database-held rate limits of the unauthenticated routes.
@Suite struct RateLimiterTests {
    static func limiter(_ blocks: ManagerBlocks, startsPerDevice: Int = 2) -> RateLimiter {
        var limits = ManagerConfiguration.Limits()
        limits.startsPerDevice = startsPerDevice
        return RateLimiter(database: blocks.manager.database, limits: limits, logger: Logger(label: "test"))
    }

    @Test func aKeyPastItsLimitIsToldWhenToComeBackAndOtherKeysAreNotCharged() async throws {
        try await ManagerBlocks.with { blocks in
            let limiter = Self.limiter(blocks)
            try await limiter.charge(.startsPerDevice, key: "device-a")
            try await limiter.charge(.startsPerDevice, key: "device-a")
            let refused = await #expect(throws: ManagerError.self) {
                try await limiter.charge(.startsPerDevice, key: "device-a")
            }
            #expect(refused?.status == .tooManyRequests)
            let retryAfter = try #require(refused?.retryAfterSeconds)
            #expect(retryAfter > 0 && retryAfter <= limiter.limits.windowMilliseconds / 1000 + 1)
            try await limiter.charge(.startsPerDevice, key: "device-b")
            try await limiter.charge(.decryptsPerAddress, key: "device-a")
        }
    }

    /// A use counted in a transaction that rolls back is not charged; a refusal is (a flood keeps being refused).
    @Test func aUseCountsWithItsCallersTransaction() async throws {
        try await ManagerBlocks.with { blocks in
            let limiter = Self.limiter(blocks, startsPerDevice: 1)
            await #expect(throws: Abandoned.self) {
                try await blocks.write { store -> Void in
                    _ = try await limiter.countUse(.startsPerDevice, key: "device-a", in: store)
                    throw Abandoned()
                }
            }
            try await limiter.charge(.startsPerDevice, key: "device-a")
            let use = try await blocks.write { try await limiter.countUse(.startsPerDevice, key: "device-a", in: $0) }
            #expect(use.uses == 2)
            #expect(throws: ManagerError.self) { try limiter.enforce(use) }
            let next = try await blocks.write { try await limiter.countUse(.startsPerDevice, key: "device-a", in: $0) }
            #expect(next.uses == 3, "the refused use was counted")
        }
    }

    /// The counters hold hashes: an address charged is nowhere in the database's files. The control writes the address
    /// itself as a key, and the same search finds it.
    @Test func theDatabaseHoldsNoAddress() async throws {
        try await ManagerBlocks.with { blocks in
            let address = "198.51.100.203"
            try await Self.limiter(blocks).charge(.viewsPerAddress, key: address)
            #expect(!blocks.databaseFilesHold(address))
            _ = try await blocks.write { try await $0.countUse(of: address, windowStart: 0) }
            #expect(blocks.databaseFilesHold(address))
        }
    }
}

/// Thrown to roll a transaction back.
private struct Abandoned: Error {}
