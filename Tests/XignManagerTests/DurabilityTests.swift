import Foundation
import Logging
import NIOConcurrencyHelpers
import SQLKit
import Testing
import XignManagerConfiguration
import XignTestSupport

@testable import XignManager

/// Database.Durability on SQLite: an unsynced transaction commits without fsync, and every other one is synced again.
@Suite struct DurabilityTests {
    /// A fresh SQLite manager database in a directory of its own, with the configuration that names it.
    static func temporaryDatabase() async throws -> (TemporaryDirectory, ManagerConfiguration, Database) {
        let directory = TemporaryDirectory()
        var configuration = ManagerConfiguration()
        configuration.databasePath = directory.file("manager.sqlite")
        return (directory, configuration, try await Database.open(configuration, logger: Logger(label: "test")))
    }

    func synchronous(_ store: ManagerStore) async throws -> Int {
        try await store.sql.raw("PRAGMA synchronous").first()?.decode(column: "synchronous", as: Int.self) ?? -1
    }

    @Test func anUnsyncedTransactionLeavesTheNextOneSynced() async throws {
        let (directory, _, database) = try await Self.temporaryDatabase()
        let (normal, full) = (1, 2)
        #expect(try await database.transaction { try await synchronous($0) } == full)
        #expect(try await database.transaction(durability: .unsynced) { try await synchronous($0) } == normal)
        #expect(try await database.transaction { try await synchronous($0) } == full)
        // A failed unsynced transaction too.
        struct Refused: Error {}
        await #expect(throws: Refused.self) {
            try await database.transaction(durability: .unsynced) { _ in throw Refused() }
        }
        #expect(try await database.transaction { try await synchronous($0) } == full)
        await database.close()
        withExtendedLifetime(directory) {}
    }

    /// Long polls re-read through `read`, which on SQLite is a connection of its own: a writer that holds the
    /// database (a PIN check) does not hold them up, and they do not hold it up. A `transaction` does wait: the control.
    /// The writer holds until the test lets it go, so the order is what is checked, not how a loaded machine's clock ran.
    @Test func readsDoNotWaitForTheWriter() async throws {
        let (directory, _, database) = try await Self.temporaryDatabase()
        let holding = NIOLockedValueBox(false), released = NIOLockedValueBox(false),
            controlDone = NIOLockedValueBox(false)
        let writing = Task {
            try await database.transaction { store in
                try await store.sql.raw("INSERT INTO rate_limits (key, window_start, count) VALUES ('w', 0, 1)").run()
                holding.withLockedValue { $0 = true }
                for _ in 0..<3_000 where !released.withLockedValue { $0 } {
                    try await Task.sleep(for: .milliseconds(10))
                }
                holding.withLockedValue { $0 = false }
            }
        }
        for _ in 0..<3_000 where !holding.withLockedValue { $0 } { try await Task.sleep(for: .milliseconds(10)) }
        #expect(holding.withLockedValue { $0 }, "the writer holds the database")
        let count = try await database.read {
            try await $0.sql.raw("SELECT COUNT(*) AS n FROM rate_limits").first()?.decode(column: "n", as: Int.self)
        }
        #expect(holding.withLockedValue { $0 }, "the read did not wait for the writer: it still holds the database")
        #expect(count == 0, "and sees what was committed before it, not the writer's row")
        let control = Task {
            _ = try await database.transaction { try await $0.sql.raw("SELECT 1 AS one").first() }
            controlDone.withLockedValue { $0 = true }
        }
        try await Task.sleep(for: .milliseconds(500))
        #expect(!controlDone.withLockedValue { $0 }, "a transaction waits for the writer")
        released.withLockedValue { $0 = true }
        try await control.value
        #expect(controlDone.withLockedValue { $0 }, "and goes on once the writer is done")
        try await writing.value
        await database.close()
        withExtendedLifetime(directory) {}
    }

    /// Expired rows go in batches of `purgeBatch`, each its own transaction, until none is left.
    @Test func expiredRowsArePurgedInBatches() async throws {
        var (directory, configuration, database) = try await Self.temporaryDatabase()
        configuration.signingKeyPath = directory.file("signing-key.pem")
        configuration.pinSealingKeyPath = directory.file("pin-sealing-key.pem")
        configuration.pepperPath = directory.file("pin-pepper")
        let rows = Expiry.purgeBatch * 2 + 7
        try await database.transaction { store in
            try await store.sql.raw(
                """
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(bind: rows))
                INSERT INTO rate_limits (key, window_start, count) SELECT 'k' || i, 0, 1 FROM n
                """
            ).run()
            try await store.sql.raw(
                "INSERT INTO rate_limits (key, window_start, count) VALUES ('current', 9000000000000, 1)"
            ).run()
        }
        let batch = try await database.transaction { store in
            try await store.purge(
                .rateLimits, before: 1, windowsBefore: 1, auditBefore: 1, limit: Expiry.purgeBatch)
        }
        #expect(batch == Expiry.purgeBatch)
        let secrets = try ManagerSecrets.open(
            configuration, recorded: .init(signingKey: nil, checks: [:], verifiers: []))
        let manager = try IdentityManager(
            configuration: configuration, database: database, secrets: secrets, logger: Logger(label: "test"))
        #expect(try await manager.expiry.purgeExpired()["rate_limits"] == rows - Expiry.purgeBatch)
        let left = try await database.read {
            try await $0.sql.raw("SELECT key FROM rate_limits").all().map {
                try $0.decode(column: "key", as: String.self)
            }
        }
        #expect(left == ["current"], "the window that has not ended stays")
        await database.close()
        withExtendedLifetime(directory) {}
    }
}
