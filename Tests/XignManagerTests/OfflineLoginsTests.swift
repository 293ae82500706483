import Foundation
import Testing
import XignProtocol
import XignTestSupport

@testable import XignManager

/// Offline login: the policy a device is sent, and its report of what its TPM let in or refused.
@Suite struct OfflineLoginsTests {
    @Test func onlyATPMKeyMayLogInOfflineAndTheAccountsPolicyComesFirst() async throws {
        try await ManagerBlocks.with { blocks in
            let offline = blocks.manager.offline
            let manager = blocks.manager.configuration.offline
            var activation = try await blocks.activation(try await blocks.account().activationId)
            #expect(offline.policy(keyKind: .software, reportedThrough: 0, of: activation).graceMilliseconds == 0)
            #expect(offline.policy(keyKind: .passkey, reportedThrough: 0, of: activation).graceMilliseconds == 0)
            let tpm = offline.policy(keyKind: .tpm, reportedThrough: 7, of: activation)
            #expect(tpm.graceMilliseconds == manager.graceMilliseconds && tpm.maxFailures == manager.maxFailures)
            #expect(tpm.reportedThrough == 7 && tpm.pinGeneration == activation.pinGeneration)
            (activation.offlineGraceMilliseconds, activation.offlineMaxFailures) = (3_600_000, 2)
            let own = offline.policy(keyKind: .tpm, reportedThrough: 0, of: activation)
            #expect(own.graceMilliseconds == 3_600_000 && own.maxFailures == 2)
        }
    }

    /// Each wrong PIN is one failure of the lockout and each login an audit entry, once: the report sent again after a
    /// lost answer adds nothing. A device's clock ahead of the manager's is not believed.
    @Test func aReportIsChargedOnceAndItsTimesKeptWithinReason() async throws {
        try await ManagerBlocks.with { blocks in
            let account = try await blocks.account()
            let device = try await blocks.enrolDevice(of: account, kind: .tpm)
            let now = IdentityManager.now()
            let report = OfflineReportMessage(
                events: [
                    OfflineEventMessage(sequence: 1, at: now - 60_000, kind: .wrongPIN, service: "login"),
                    OfflineEventMessage(sequence: 2, at: now - 50_000, kind: .wrongPIN, service: "login"),
                    OfflineEventMessage(sequence: 3, at: now + 86_400_000, kind: .login, service: "gdm-password"),
                ], droppedLogins: 0)
            try await blocks.manager.offline.recordOfflineReport(report, deviceId: device.id, host: "laptop")
            #expect(try await blocks.activation(account.activationId).failedAttempts == 2)
            // Dated by the device's clock, so the audit's order puts them before the account's creation.
            let audit = try await blocks.audit().filter { $0.actor == "device \(device.id)" }
            #expect(audit.count { $0.event == .loginFailure } == 2)
            let login = try #require(audit.first { $0.event == .offlineLogin })
            #expect(login.at <= IdentityManager.now() && login.service == "gdm-password" && login.host == "laptop")

            try await blocks.manager.offline.recordOfflineReport(report, deviceId: device.id, host: "laptop")
            #expect(try await blocks.activation(account.activationId).failedAttempts == 2, "the report sent again")
            #expect(try await blocks.audit().count { $0.actor == "device \(device.id)" } == audit.count)
        }
    }

    @Test func aRevokedDeviceReportsNothing() async throws {
        try await ManagerBlocks.with { blocks in
            let account = try await blocks.account()
            let device = try await blocks.enrolDevice(of: account, kind: .tpm)
            try await blocks.write { try await $0.revokeDevice(device.id) }
            let report = OfflineReportMessage(
                events: [
                    OfflineEventMessage(sequence: 1, at: IdentityManager.now(), kind: .wrongPIN, service: "login")
                ],
                droppedLogins: 0)
            let refused = await #expect(throws: ManagerError.self) {
                try await blocks.manager.offline.recordOfflineReport(report, deviceId: device.id, host: "laptop")
            }
            #expect(refused?.detail.code == .deviceNotFound)
            #expect(try await blocks.activation(account.activationId).failedAttempts == 0)
        }
    }
}
