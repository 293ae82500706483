import Foundation
import Testing
import XignCrypto
import XignManagerConfiguration
import XignProtocol
import XignTestSupport

@testable import XignManager

/// Whether a device may act: the requirement against the key's kind and attestation, then enrolment and the lock.
@Suite struct DeviceEligibilityTests {
    static let attested = DeviceEligibility.KeyFinding.attested(issuer: "CN=Maker EK CA")
    static let unattested = DeviceEligibility.KeyFinding.unattested(because: "no EK certificate")

    static func refusal(
        _ requirement: HardwareKeyRequirement, _ kind: KeyKind, synced: Bool = false,
        _ finding: DeviceEligibility.KeyFinding? = nil
    ) -> String? {
        DeviceEligibility.refusal(of: requirement, kind: kind, synced: synced, finding: finding, what: "device")
    }

    @Test func eachRequirementTakesTheKeysItNamesAndSaysWhyItRefusesTheOthers() {
        for kind in [KeyKind.software, .tpm, .passkey] { #expect(Self.refusal(.none, kind, synced: true) == nil) }

        #expect(Self.refusal(.claimed, .software)?.contains("software key") == true)
        #expect(Self.refusal(.claimed, .tpm, Self.unattested) == nil, "claimed takes a TPM key unproven")
        #expect(Self.refusal(.claimed, .passkey) == nil)
        #expect(Self.refusal(.claimed, .passkey, synced: true)?.contains("synced") == true)

        #expect(Self.refusal(.attested, .tpm, Self.attested) == nil)
        #expect(Self.refusal(.attested, .tpm, Self.unattested)?.hasSuffix("not attested: no EK certificate") == true)
        #expect(Self.refusal(.attested, .tpm)?.contains("not attested") == true)
        #expect(Self.refusal(.attested, .passkey)?.contains("passkey") == true)
        #expect(Self.refusal(.attested, .software)?.contains("software key") == true)
    }

    @Test func aKeyIsDescribedByWhatWasFound() {
        #expect(DeviceEligibility.keyDescription(.software, finding: nil) == "software key")
        #expect(DeviceEligibility.keyDescription(.tpm, finding: Self.unattested) == "tpm key, not attested")
        #expect(DeviceEligibility.keyDescription(.tpm, finding: Self.attested).contains("EK issuer CN=Maker EK CA"))
        let synced = ManagerStore.Passkey(
            credentialId: "c", aaguid: "", signCount: 0, backupEligible: true, backedUp: false)
        #expect(DeviceEligibility.keyDescription(.passkey, passkey: synced, finding: nil) == "synced passkey")
        #expect(
            DeviceEligibility.keyDescription(.tpm, finding: .init(ekIssuer: nil, unattestedBecause: nil))
                == "tpm key, not attested")
    }

    static func authenticating(
        _ blocks: ManagerBlocks, _ device: ManagerBlocks.Device, requirement: HardwareKeyRequirement = .none
    ) async throws -> String {
        try await blocks.write { store in
            try await DeviceEligibility.authenticatingDevice(device.id, requirement: requirement, in: store).1.id
        }
    }

    @Test func aDeviceOfAKindTheServiceRefusesIsToldHowToPersonalizeAgain() async throws {
        try await ManagerBlocks.with { blocks in
            let account = try await blocks.account()
            let software = try await blocks.enrolDevice(of: account)
            #expect(try await Self.authenticating(blocks, software) == account.activationId)
            let claimed = await #expect(throws: ManagerError.self) {
                try await Self.authenticating(blocks, software, requirement: .claimed)
            }
            #expect(claimed?.status == .forbidden && claimed?.detail.code == .securityInsufficient)
            #expect(claimed?.description.contains("device_key = tpm") == true)

            let tpm = try await blocks.enrolDevice(of: try await blocks.account("bob@example.org"), kind: .tpm)
            #expect(try await Self.authenticating(blocks, tpm, requirement: .claimed).isEmpty == false)
            let attested = await #expect(throws: ManagerError.self) {
                try await Self.authenticating(blocks, tpm, requirement: .attested)
            }
            #expect(attested?.description.contains("a machine whose TPM the manager trusts") == true)

            let proven = try await blocks.enrolDevice(
                of: try await blocks.account("carol@example.org"), kind: .tpm, ekIssuer: "CN=Maker EK CA")
            #expect(try await Self.authenticating(blocks, proven, requirement: .attested).isEmpty == false)
        }
    }

    /// A lock in force answers 423 before any PIN is asked for; once it is cleared the same device may start again.
    @Test func aLockedActivationIsRefusedUntilTheLockIsCleared() async throws {
        try await ManagerBlocks.with { blocks in
            let account = try await blocks.account()
            let device = try await blocks.enrolDevice(of: account)
            let lock = LockoutMessage(
                isPermanent: false, lockedUntil: IdentityManager.now() + 60_000, failedAttempts: 3,
                issuedAt: IdentityManager.now())
            try await blocks.write { try await $0.recordPINFailure(lock, activationId: account.activationId) }
            let locked = await #expect(throws: ManagerError.self) { try await Self.authenticating(blocks, device) }
            #expect(locked?.status.code == 423 && locked?.detail.code == .lockedOut)
            #expect(locked?.detail.lockout?.failedAttempts == 3)
            #expect(try await blocks.write { try await $0.clearLockout(activationId: account.activationId) })
            #expect(try await Self.authenticating(blocks, device) == account.activationId)
        }
    }

    /// A revoked device, or one whose activation another device took, is no longer enrolled.
    @Test func aDeviceThatLostItsActivationIsNotEnrolled() async throws {
        try await ManagerBlocks.with { blocks in
            let account = try await blocks.account()
            let first = try await blocks.enrolDevice(of: account)
            let second = try await blocks.enrolDevice(of: account)
            let replaced = await #expect(throws: ManagerError.self) { try await Self.authenticating(blocks, first) }
            #expect(replaced?.status == .notFound && replaced?.detail.code == .deviceNotFound)
            #expect(replaced?.description.contains("personalize it again") == true)
            #expect(try await Self.authenticating(blocks, second) == account.activationId)
            try await blocks.write { try await $0.revokeDevice(second.id) }
            let revoked = await #expect(throws: ManagerError.self) { try await Self.authenticating(blocks, second) }
            #expect(revoked?.detail.code == .deviceNotFound)
        }
    }
}
