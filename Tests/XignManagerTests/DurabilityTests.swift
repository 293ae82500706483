import Foundation
import Logging
import SQLKit
import Testing
import XignManagerConfiguration
import XignTestSupport

@testable import XignManager

/// Database.Durability on SQLite: an unsynced transaction commits without fsync, and every other one is synced again.
@Suite struct DurabilityTests {
    func synchronous(_ store: ManagerStore) async throws -> Int {
        try await store.sql.raw("PRAGMA synchronous").first()?.decode(column: "synchronous", as: Int.self) ?? -1
    }

    @Test func anUnsyncedTransactionLeavesTheNextOneSynced() async throws {
        let directory = TemporaryDirectory()
        var configuration = ManagerConfiguration()
        configuration.databasePath = directory.file("manager.sqlite")
        let database = try await Database.open(configuration, logger: Logger(label: "test"))
        let (normal, full) = (1, 2)
        #expect(try await database.transaction { try await synchronous($0) } == full)
        #expect(try await database.transaction(durability: .unsynced) { try await synchronous($0) } == normal)
        #expect(try await database.transaction { try await synchronous($0) } == full)
        // A failed unsynced transaction too.
        struct Refused: Error {}
        await #expect(throws: Refused.self) { try await database.transaction(durability: .unsynced) { _ in throw Refused() } }
        #expect(try await database.transaction { try await synchronous($0) } == full)
        await database.close()
    }
}
