import Foundation
import XignCrypto
import XignManagerConfiguration
import XignProtocol
import XignWebAuthn

/// Requests a device or a host signs: the one signature check, and the challenges a device asks for first.
extension IdentityManager {
    /// Who signed a request, for the refusal.
    enum Signer: String { case device, host }

    /// The one check of a signed request (docs/design.md, invariant 3): the signature covers the method, the path,
    /// the body and a single-use challenge. Spending the challenge is the caller's, in the transaction that acts.
    static func checkSignature(
        _ signature: Data, by key: P256PublicKey, of signer: Signer, path: String, body: Data, challenge: String
    ) throws {
        let message = SignedRequest.canonicalMessage(method: "POST", path: path, body: body, challenge: challenge)
        guard key.isValidSignature(signature, for: message) else {
            throw ManagerError(.unauthorized, .signatureInvalid, "the \(signer.rawValue) signature does not verify")
        }
    }

    /// The manager as a WebAuthn relying party: the origin of its public URL, and that URL's host as the RP id. A
    /// passkey is bound to it, so the public URL must not change once browsers enrolled.
    public var relyingParty: RelyingParty {
        let url = managerURL
        return RelyingParty(origin: url.origin, id: url.host.trimmingCharacters(in: ["[", "]"]))
    }

    /// How a device proves a request: a raw P-256 signature, or a passkey's assertion. Read before anything is looked
    /// up, so an unsigned or garbled request is refused (401) without touching a row.
    enum DeviceProof {
        case signature(Data)
        case assertion(PasskeyAssertion)

        init(header: String?) throws {
            do {
                if let header, let assertion = try PasskeyAssertion(header: header) {
                    self = .assertion(assertion)
                    return
                }
            } catch {
                throw ManagerError(.unauthorized, .signatureInvalid, "the passkey's assertion is refused: \(error)")
            }
            self = .signature(try IdentityManager.signature(from: header))
        }
    }

    /// The one check that `device` signed a request (docs/design.md, invariant 3): with its P-256 key, or for a
    /// passkey with an assertion whose WebAuthn challenge is SHA-256 of the same canonical message. A passkey's counter
    /// moves in the caller's transaction, so one assertion is accepted once even when sent twice at the same moment.
    func checkDeviceProof(
        _ proof: DeviceProof, of device: ManagerStore.DeviceRecord, path: String, body: Data, challenge: String,
        in store: ManagerStore
    ) async throws {
        switch (proof, device.passkey) {
        case (.signature(let raw), nil):
            try Self.checkSignature(
                raw, by: device.publicKey, of: .device, path: path, body: body, challenge: challenge)
        case (.assertion(let assertion), let passkey?):
            let message = SignedRequest.canonicalMessage(method: "POST", path: path, body: body, challenge: challenge)
            let result: AssertionResult
            do {
                result = try relyingParty.verifyAssertion(
                    assertion, publicKey: device.publicKey, challenge: SHA256.hash(message),
                    storedSignCount: passkey.signCount)
            } catch {
                throw ManagerError(.unauthorized, .signatureInvalid, "the passkey's assertion is refused: \(error)")
            }
            // The BE flag is fixed at a credential's creation (WebAuthn L3 §7.2, step 17): one that differs from the
            // stored flag is not the authenticator that was enrolled.
            guard result.isBackupEligible == passkey.backupEligible else {
                throw ManagerError(
                    .unauthorized, .signatureInvalid,
                    "the passkey's assertion says backup eligible \(result.isBackupEligible ? "yes" : "no"), but it was enrolled with \(passkey.backupEligible ? "yes" : "no"): not the authenticator that was enrolled"
                )
            }
            if configuration.requireHardwareKey >= .claimed && (result.isBackedUp || result.isBackupEligible) {
                throw ManagerError(
                    .forbidden, .securityInsufficient,
                    "this passkey is synced, or may be (backup eligible), and this manager accepts only device-bound keys"
                )
            }
            guard
                try await store.advanceSignCount(
                    ofDevice: device.id, from: passkey.signCount, to: result.signCount, backedUp: result.isBackedUp)
            else {
                throw ManagerError(.unauthorized, .signatureInvalid, "the passkey's assertion was used already")
            }
        case (.signature, _?):
            throw ManagerError(
                .unauthorized, .signatureInvalid,
                "a passkey device signs with a WebAuthn assertion (\(PasskeyAssertion.prefix)…)")
        case (.assertion, nil):
            throw ManagerError(
                .unauthorized, .signatureInvalid, "this device signs with its key, not with a passkey's assertion")
        }
    }

    public func challenge(for request: ChallengeRequest) async throws -> ChallengeMessage {
        let challenge = ChallengeMessage(
            challenge: try SecureRandom.token(), expiresAt: Self.now() + configuration.sessionLifetimeMilliseconds)
        try await database.transaction(durability: .unsynced) { store in
            guard try await store.device(request.deviceId) != nil else {
                throw ManagerError(
                    .notFound, .deviceNotFound, "this device is not enrolled (or was removed) at this manager")
            }
            try await store.insertDeviceChallenge(challenge, deviceId: request.deviceId)
        }
        return challenge
    }

    /// Verifies a request signed by an enrolled device and consumes its challenge. Returns the device.
    @discardableResult
    func verifyDeviceSignature(
        deviceId: String, challenge: String, path: String, body: Data, signature: String?, in store: ManagerStore
    ) async throws -> ManagerStore.DeviceRecord {
        let proof = try DeviceProof(header: signature)
        guard let device = try await store.device(deviceId) else {
            throw ManagerError(
                .notFound, .deviceNotFound, "this device is not enrolled (or was removed) at this manager")
        }
        try await checkDeviceProof(proof, of: device, path: path, body: body, challenge: challenge, in: store)
        guard try await store.consumeDeviceChallenge(challenge, deviceId: deviceId, now: Self.now()) else {
            throw ManagerError(
                .conflict, .challengeInvalid, "the challenge is unknown, expired or was already used; request a new one"
            )
        }
        return device
    }

    /// Removes a device and finishes its activation, signed by the device itself (`xign-setup remove`).
    public func revoke(body: Data, signature: String?) async throws -> String {
        let request = try Self.decode(RevokeRequest.self, from: body, "the revocation request")
        let notice = try await database.transaction { store -> String? in
            let device = try await self.verifyDeviceSignature(
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
            return try await self.queue(
                Outbox.deviceNotice(
                    to: activation.email, alias: activation.alias,
                    device: "device \(device.id) (\(device.keyKind.rawValue) key)", added: false),
                in: store)
        }
        if let notice { await deliverMail(id: notice) }
        logger.info("device revoked", metadata: ["device": "\(request.deviceId)"])
        return try signer.sign(
            RevocationResultMessage(nonce: request.nonce, deviceId: request.deviceId), type: SignedAnswerType.revocation
        )
    }
}
