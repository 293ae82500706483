import Foundation
import XignCrypto
import XignManagerConfiguration
import XignProtocol
import XignWebAuthn

/// The challenges a device asks for before it signs, and a device's own revocation.
extension IdentityManager {
    /// The manager as a WebAuthn relying party (RequestVerifier).
    public var relyingParty: RelyingParty { verifier.relyingParty }

    public func challenge(for request: ChallengeRequest) async throws -> ChallengeMessage {
        let challenge = ChallengeMessage(
            challenge: try SecureRandom.token(), expiresAt: Self.now() + configuration.sessionLifetimeMilliseconds)
        guard
            try await database.statement({ try await $0.insertDeviceChallenge(challenge, deviceId: request.deviceId) })
        else {
            throw ManagerError(
                .notFound, .deviceNotFound, "this device is not enrolled (or was removed) at this manager")
        }
        return challenge
    }

    /// Removes a device and finishes its activation, signed by the device itself (`xign-setup remove`).
    public func revoke(body: Data, signature: String?) async throws -> String {
        let request = try RequestBody.decode(RevokeRequest.self, from: body, "the revocation request")
        let notice = try await database.transaction { store -> String? in
            let device = try await self.verifier.verifyDeviceSignature(
                deviceId: request.deviceId, challenge: request.challenge, path: APIPath.deviceRevocations, body: body,
                signature: signature, in: store
            )
            let activationId = device.activationId
            let activation = try await store.activation(id: activationId)
            try await store.revokeDevice(request.deviceId)
            try await store.markRevoked(activationId: activationId)
            try await store.recordAudit(
                AuditEvent(
                    .revocation, email: activation?.email, activationId: activationId,
                    detail: "the device revoked itself"
                        + (device.passkey.map { ", passkey credential \($0.credentialId.prefix(64))" } ?? ""),
                    actor: "device \(request.deviceId)"
                ))
            guard let activation else { return nil }
            return try await self.mail.queue(
                Outbox.deviceNotice(
                    to: activation.email, alias: activation.alias,
                    device: "device \(device.id) (\(device.keyKind.rawValue) key)", added: false),
                in: store)
        }
        if let notice { await mail.deliver(id: notice) }
        logger.info("device revoked", metadata: ["device": "\(request.deviceId)"])
        return try signer.sign(
            RevocationResultMessage(nonce: request.nonce, deviceId: request.deviceId), type: SignedAnswerType.revocation
        )
    }
}
