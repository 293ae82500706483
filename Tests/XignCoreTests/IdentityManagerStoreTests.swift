import FoundationEssentials
import Testing
import XignProtocol
import XignTestSupport

@testable import XignCore

/// The state file is decoded once while it stays the same file, and read again the moment it is another.
@Suite struct IdentityManagerStoreTests {
    @Test func theFileIsDecodedOnceUntilItChanges() throws {
        let directory = TemporaryDirectory()
        let store = IdentityManagerStore(directory: directory.file("state"))
        let lock = { (attempts: Int) in
            IdentityManagerStore.PendingLockoutRecord(
                isPermanent: false, lockedUntil: 4_000_000_000_000, failedAttempts: attempts)
        }
        try store.update { $0.pendingLockouts["activation"] = lock(1) }
        let decodes = { store.lastRead.decodes.load(ordering: .relaxed) }
        let start = decodes()
        for _ in 0..<5 { #expect(try store.pendingLockout(activationId: "activation")?.failedAttempts == 1) }
        #expect(decodes() - start == 1, "five reads, one decode")

        // Another process replaces the file (as xign-setup does): the next read sees it.
        var changed = IdentityManagerStore.Contents()
        changed.pendingLockouts["activation"] = lock(2)
        try AtomicFile.write(try JSONEncoder().encode(changed), to: store.path, mode: 0o600)
        #expect(try store.pendingLockout(activationId: "activation")?.failedAttempts == 2)
        #expect(decodes() - start == 2)

        // This store's own write: read back at once.
        try store.update { $0.pendingLockouts["activation"] = lock(3) }
        #expect(try store.pendingLockout(activationId: "activation")?.failedAttempts == 3)
        try FileManager.default.removeItem(atPath: store.path)
        #expect(
            try store.pendingLockout(activationId: "activation") == nil,
            "a removed file is no enrolment, not the last one read")
    }
}
