import Foundation
import Testing
import XignCrypto
import XignProtocol
import XignTestSupport

@testable import XignManager

/// A device taking an activation: the session spent once, after its proof; the device, its audit and the signed answer
/// written together, or nothing.
@Suite struct EnrolmentsTests {
    /// A personalization session for the account's activation data, as the decrypt step opens it.
    static func session(
        _ blocks: ManagerBlocks, of account: ManagerBlocks.Account,
        outcome: PersonalizationOutcome = .newPersonalization
    ) async throws -> String {
        let session = SessionMessage(
            id: try SecureRandom.identifier(), challenge: try SecureRandom.token(),
            expiresAt: IdentityManager.now() + 60_000)
        try await blocks.write { store in
            try await store.insertPersonalizationSession(
                session, activationId: account.activationId, outcome: outcome, mergeDeviceId: nil)
        }
        return session.id
    }

    static func enrolment(
        session: String, mode: PersonalizationMode = .new, key: P256PrivateKey, kind: KeyKind = .software
    ) -> Enrolments.NewEnrolment {
        Enrolments.NewEnrolment(
            sessionId: session, mode: mode, nonce: "nonce-1",
            deviceKey: Base64URL.encode(key.publicKey.derRepresentation), keyKind: kind,
            information: DeviceInformationMessage(name: "laptop", platform: "linux"), passkey: nil)
    }

    static func enrol(
        _ blocks: ManagerBlocks, _ enrolment: Enrolments.NewEnrolment,
        proving prove: @escaping @Sendable (String) throws -> Void = { _ in }
    ) async throws -> PersonalizationResultMessage {
        let answer = try await blocks.manager.enrolments.enrol(enrolment, newActivation: nil, proving: prove)
        let payload = try JWS.verify(
            answer, expectedType: SignedAnswerType.personalization, key: blocks.manager.signer.publicKey)
        return try JSONDecoder().decode(PersonalizationResultMessage.self, from: payload)
    }

    @Test func aDeviceTakesTheActivationOnceWithItsAudit() async throws {
        try await ManagerBlocks.with { blocks in
            let account = try await blocks.account()
            let session = try await Self.session(blocks, of: account)
            let key = try P256PrivateKey()
            let result = try await Self.enrol(blocks, Self.enrolment(session: session, key: key))
            #expect(result.activationId == account.activationId && result.nonce == "nonce-1")
            let device = try #require(
                try await blocks.read { try await $0.device(result.deviceId, holdingItsActivation: true) })
            #expect(device.publicKey == key.publicKey && device.keyKind == .software)
            #expect(try await blocks.activation(account.activationId).state == .personalized)
            #expect(try await blocks.audit().last?.event == .enrolment)

            let again = await #expect(throws: ManagerError.self) {
                try await Self.enrol(blocks, Self.enrolment(session: session, key: try P256PrivateKey()))
            }
            #expect(again?.status == .conflict && again?.detail.code == .sessionInvalid)
            let later = try await Self.session(blocks, of: account)
            let used = await #expect(throws: ManagerError.self) {
                try await Self.enrol(blocks, Self.enrolment(session: later, key: try P256PrivateKey()))
            }
            #expect(used?.description.contains("used meanwhile") == true, "the activation data is spent too")
        }
    }

    /// The proof over the session's challenge comes before anything is spent: a refused one leaves the session for the
    /// right proof.
    @Test func aRefusedProofSpendsNothing() async throws {
        try await ManagerBlocks.with { blocks in
            let account = try await blocks.account()
            let session = try await Self.session(blocks, of: account)
            struct WrongProof: Error {}
            await #expect(throws: WrongProof.self) {
                try await Self.enrol(blocks, Self.enrolment(session: session, key: try P256PrivateKey())) { _ in
                    throw WrongProof()
                }
            }
            #expect(try await blocks.activation(account.activationId).state == .pending)
            #expect(try await blocks.audit().count { $0.event == .enrolment } == 0)
            let result = try await Self.enrol(blocks, Self.enrolment(session: session, key: try P256PrivateKey()))
            #expect(result.activationId == account.activationId)
        }
    }

    @Test func aModeMustContinueItsSessionsOutcome() async throws {
        try await ManagerBlocks.with { blocks in
            let account = try await blocks.account()
            let session = try await Self.session(blocks, of: account)
            let refused = await #expect(throws: ManagerError.self) {
                try await Self.enrol(
                    blocks, Self.enrolment(session: session, mode: .override, key: try P256PrivateKey()))
            }
            #expect(refused?.description.contains("does not continue a newPersonalization session") == true)
        }
    }

    /// Under `require_hardware_key = attested` a key without attestation is refused, and the session stays.
    @Test func anUnattestedKeyIsRefusedWhereAttestationIsRequired() async throws {
        let config = ManagerFiles.testConfig + "\n[policy]\nrequire_hardware_key = attested\n"
        try await ManagerBlocks.with(config: config) { blocks in
            let account = try await blocks.account()
            let session = try await Self.session(blocks, of: account)
            for kind in [KeyKind.software, .tpm] {
                let refused = await #expect(throws: ManagerError.self) {
                    try await Self.enrol(
                        blocks, Self.enrolment(session: session, key: try P256PrivateKey(), kind: kind))
                }
                #expect(refused?.status == .forbidden && refused?.detail.code == .securityInsufficient, "\(kind)")
            }
            #expect(try await blocks.read { try await $0.personalizationSession(session) } != nil)
        }
    }
}
