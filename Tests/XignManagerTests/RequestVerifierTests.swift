import Foundation
import Testing
import XignCrypto
import XignProtocol
import XignTestSupport

@testable import XignManager

/// The one check of a device-signed request, with the device and its challenge written as personalization and
/// POST /v1/challenges write them.
@Suite struct RequestVerifierTests {
    static let path = APIPath.accountDevices
    static let body = Data(#"{"challenge":"c","deviceId":"d"}"#.utf8)

    static func signature(
        of device: ManagerBlocks.Device, path: String = path, body: Data = body, challenge: String
    ) throws -> String {
        let message = SignedRequest.canonicalMessage(method: "POST", path: path, body: body, challenge: challenge)
        return Base64URL.encode(try device.key.signature(for: message))
    }

    static func verify(
        _ blocks: ManagerBlocks, deviceId: String, challenge: String, signature: String?
    ) async throws -> ManagerStore.DeviceRecord {
        let verifier = blocks.manager.verifier
        return try await blocks.write { store in
            try await verifier.verifyDeviceSignature(
                deviceId: deviceId, challenge: challenge, path: path, body: body, signature: signature, in: store)
        }
    }

    @Test func aSignedRequestIsAcceptedOnceAndItsChallengeIsSpent() async throws {
        try await ManagerBlocks.with { blocks in
            let device = try await blocks.enrolDevice(of: try await blocks.account())
            let challenge = try await blocks.challenge(for: device)
            let signature = try Self.signature(of: device, challenge: challenge)
            let verified = try await Self.verify(
                blocks, deviceId: device.id, challenge: challenge, signature: signature)
            #expect(verified.id == device.id)
            let replayed = await #expect(throws: ManagerError.self) {
                try await Self.verify(blocks, deviceId: device.id, challenge: challenge, signature: signature)
            }
            #expect(replayed?.status == .conflict && replayed?.detail.code == .challengeInvalid)
        }
    }

    /// A signature over another path or body is refused before the challenge is spent: the right one still passes.
    @Test func aSignatureOverAnotherRequestIsRefusedAndSpendsNothing() async throws {
        try await ManagerBlocks.with { blocks in
            let device = try await blocks.enrolDevice(of: try await blocks.account())
            let challenge = try await blocks.challenge(for: device)
            for forged in [
                try Self.signature(of: device, path: APIPath.deviceRevocations, challenge: challenge),
                try Self.signature(of: device, body: Data("{}".utf8), challenge: challenge),
                try Self.signature(
                    of: ManagerBlocks.Device(id: device.id, key: try P256PrivateKey()), challenge: challenge),
            ] {
                let refused = await #expect(throws: ManagerError.self) {
                    try await Self.verify(blocks, deviceId: device.id, challenge: challenge, signature: forged)
                }
                #expect(refused?.status == .unauthorized && refused?.detail.code == .signatureInvalid)
            }
            let right = try Self.signature(of: device, challenge: challenge)
            #expect(
                try await Self.verify(blocks, deviceId: device.id, challenge: challenge, signature: right).id
                    == device.id)
        }
    }

    @Test func aChallengeThatRanOutOrBelongsToAnotherDeviceIsRefused() async throws {
        try await ManagerBlocks.with { blocks in
            let device = try await blocks.enrolDevice(of: try await blocks.account())
            let other = try await blocks.enrolDevice(of: try await blocks.account("bob@example.org"))
            let ranOut = try await blocks.challenge(for: device, expiresAt: IdentityManager.now() - 1)
            let othersChallenge = try await blocks.challenge(for: other)
            for challenge in [ranOut, othersChallenge, "never-issued"] {
                let refused = await #expect(throws: ManagerError.self) {
                    try await Self.verify(
                        blocks, deviceId: device.id, challenge: challenge,
                        signature: try Self.signature(of: device, challenge: challenge))
                }
                #expect(refused?.detail.code == .challengeInvalid)
            }
            #expect(
                try await Self.verify(
                    blocks, deviceId: other.id, challenge: othersChallenge,
                    signature: try Self.signature(of: other, challenge: othersChallenge)
                ).id == other.id, "the other device's own challenge is still unspent")
        }
    }

    @Test func anUnsignedRequestOrAnUnknownDeviceIsRefused() async throws {
        try await ManagerBlocks.with { blocks in
            let device = try await blocks.enrolDevice(of: try await blocks.account())
            let challenge = try await blocks.challenge(for: device)
            for header in [nil, "", "not base64url!"] as [String?] {
                let refused = await #expect(throws: ManagerError.self) {
                    try await Self.verify(blocks, deviceId: device.id, challenge: challenge, signature: header)
                }
                #expect(refused?.status == .unauthorized && refused?.detail.code == .signatureInvalid)
            }
            let unknown = await #expect(throws: ManagerError.self) {
                try await Self.verify(
                    blocks, deviceId: "removed", challenge: challenge,
                    signature: try Self.signature(of: device, challenge: challenge))
            }
            #expect(unknown?.status == .notFound && unknown?.detail.code == .deviceNotFound)
        }
    }

    /// A passkey device proves requests with a WebAuthn assertion; its key's raw signature is not taken.
    @Test func aPasskeyDeviceIsNotTakenWithARawSignature() async throws {
        try await ManagerBlocks.with { blocks in
            let passkey = ManagerStore.Passkey(
                credentialId: "credential", aaguid: String(repeating: "0", count: 32), signCount: 0,
                backupEligible: false, backedUp: false)
            let device = try await blocks.enrolDevice(of: try await blocks.account(), kind: .passkey, passkey: passkey)
            let challenge = try await blocks.challenge(for: device)
            let refused = await #expect(throws: ManagerError.self) {
                try await Self.verify(
                    blocks, deviceId: device.id, challenge: challenge,
                    signature: try Self.signature(of: device, challenge: challenge))
            }
            #expect(refused?.detail.code == .signatureInvalid && refused?.description.contains("WebAuthn") == true)
        }
    }

    /// The relying party is the public URL's origin, and its host without an IPv6 literal's brackets.
    @Test func theRelyingPartyIsThePublicURL() throws {
        let verifier = RequestVerifier(
            managerURL: { try! ManagerURL("https://[2001:db8::1]:8443") }, requireHardwareKey: .none)
        #expect(verifier.relyingParty.id == "2001:db8::1")
        #expect(verifier.relyingParty.origin == "https://[2001:db8::1]:8443")
    }
}
