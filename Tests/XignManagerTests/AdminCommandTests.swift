import Foundation
import Testing
import XignTestSupport

/// What an administrator does at the manager's command line takes effect at the next login of any host.
@Suite(.machineShare) struct AdminCommandTests {
    @Test func lockUnlockAndDeviceRemovalReachTheNextLogin() async throws {
        let manager = try ManagerProcess()
        let api = API(manager: manager)
        let bob = try await api.enrolDevice("bob@example.org")
        let carol = try await api.enrolDevice("carol@example.org")
        #expect(try manager.admin(["accounts", "lock", "bob@example.org"]).status == 0)
        let locked = try await api.postStart(bob)
        #expect(locked.status == 423 && locked.errorCode == "accountLocked", "\(locked.json)")
        #expect(try manager.admin(["accounts", "unlock", "bob@example.org"]).status == 0)
        #expect(try await api.authenticate(bob, pin: "24680").status == 200)

        // Another account's device is not bob's to remove: refused with what to check, and carol still logs in.
        let wrong = try manager.admin(["accounts", "revoke-device", "bob@example.org", carol.id])
        #expect(wrong.status != 0 && wrong.stderr.contains("bob@example.org has no device"), "\(wrong.stderr)")
        #expect(try await api.authenticate(carol, pin: "24680").status == 200)
        let removed = try manager.admin(["accounts", "revoke-device", "bob@example.org", bob.id])
        #expect(removed.status == 0 && removed.stdout.contains("is removed"), "\(removed.stderr)")
        let refused = try await api.postStart(bob)
        #expect(refused.status != 200, "the removed device is refused: \(refused.json)")
        #expect(try await api.authenticate(carol, pin: "24680").status == 200, "control")
    }
}
