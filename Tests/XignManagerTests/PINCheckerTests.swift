import Foundation
import Testing
import XignTestSupport

@testable import XignManager

/// The PIN check alone, over an account made as registration makes it.
@Suite struct PINCheckerTests {
    static func withActivation(_ body: (PINChecker, String) async throws -> Void) async throws {
        try await ManagerBlocks.with { blocks in
            try await body(blocks.manager.pinChecker, try await blocks.account().activationId)
        }
    }

    static let purpose = PINChecker.Purpose(service: "pam", host: "db1", actor: "test")

    @Test func aWrongPINIsChargedAndTheRightOneClearsTheCount() async throws {
        try await Self.withActivation { checker, activation in
            let admit = { @Sendable (record: ManagerStore.ActivationRecord?) in try #require(record) }
            let wrong = try await checker.check("13570", activationId: activation, for: Self.purpose, admit: admit)
            #expect(wrong.lockout?.failedAttempts == 1)
            try await Task.sleep(for: .milliseconds(400))  // past the test config's 300 ms lock
            let right = try await checker.check("24680", activationId: activation, for: Self.purpose, admit: admit)
            #expect(right.lockout == nil && right.activation.id == activation)
            let record = try await checker.database.read { try await $0.activation(id: activation) }
            #expect(record?.failedAttempts == 0, "the right PIN cleared the count")
        }
    }

    /// A device that no longer holds the activation is refused before any hash, and nothing is charged.
    @Test func anotherDeviceIsRefusedAndNothingIsCharged() async throws {
        try await Self.withActivation { checker, activation in
            let refused = await #expect(throws: ManagerError.self) {
                try await checker.check("13570", ofDevice: "someone-else", activationId: activation, for: Self.purpose)
            }
            #expect(refused?.detail.code == .deviceNotFound)
            let record = try await checker.database.read { try await $0.activation(id: activation) }
            #expect(record?.failedAttempts == 0 && record?.pinCheckUntil == 0)
        }
    }

    /// A claim this instance left (a check cut off by a restart) is charged when the next `serve` starts.
    @Test func aCheckCutOffByARestartIsChargedOnce() async throws {
        try await Self.withActivation { checker, activation in
            try await checker.database.transaction { store in
                try await store.claimPINCheck(
                    activationId: activation, until: IdentityManager.now() + 30_000, by: checker.instanceId)
            }
            #expect(try await checker.settleAbandonedChecks() == 1)
            #expect(try await checker.settleAbandonedChecks() == 0, "charged once")
            let record = try await checker.database.read { try await $0.activation(id: activation) }
            #expect(record?.failedAttempts == 1)
        }
    }
}
