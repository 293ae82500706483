import Foundation
import XignCrypto
import XignManagerConfiguration
import XignProtocol
import XignWebAuthn

/// The processes as a browser runs them, its passkey as the device key: personalization with a new passkey, and a
/// login request looked at and approved with one passkey prompt. Every other device-signed request takes a passkey's
/// assertion in place of a signature (`checkDeviceProof`).
extension IdentityManager {
    /// Continues a personalization session with the passkey `navigator.credentials.create` made over its challenge.
    public func personalizeWithPasskey(body: Data) async throws -> String {
        let request = try RequestBody.decode(PasskeyPersonalizeRequest.self, from: body, "the passkey personalization")
        guard request.mode != .newActivation else {
            throw ManagerError.badRequest(
                "a browser continues a personalization with mode new or override; a second activation is made in xign-setup"
            )
        }
        guard let attestation = Base64URL.decode(request.attestationObject),
            let clientData = Base64URL.decode(request.clientDataJSON)
        else {
            throw ManagerError.badRequest("attestationObject and clientDataJSON are base64url of at most 3 KiB each")
        }
        // Checked now against the challenge it names, for the key and the credential id; that challenge must be the
        // session's, which is compared in the transaction that spends the session.
        let claimed = try Self.claimedChallenge(in: clientData)
        let credential = try Self.passkey(
            relyingParty, attestation: attestation, clientData: clientData, challenge: claimed)
        if configuration.requireHardwareKey >= .claimed && (credential.isBackupEligible || credential.isBackedUp) {
            throw ManagerError(
                .forbidden, .securityInsufficient,
                "this manager accepts only device-bound keys, and this passkey is synced to other devices; use a security key or a device-bound passkey"
            )
        }
        let credentialId = Base64URL.encode(credential.id)
        if try await database.read({ store in try await store.deviceId(ofCredential: credentialId) }) != nil {
            throw ManagerError(
                .conflict, .conflict, "this passkey is enrolled already; a passkey serves one activation")
        }
        let enrolment = Enrolments.NewEnrolment(
            sessionId: request.sessionId, mode: request.mode, nonce: request.nonce,
            deviceKey: Base64URL.encode(credential.publicKey.derRepresentation), keyKind: .passkey,
            information: request.device,
            passkey: ManagerStore.Passkey(
                credentialId: credentialId, aaguid: credential.aaguid.map { String(format: "%02x", $0) }.joined(),
                signCount: credential.signCount,
                backupEligible: credential.isBackupEligible, backedUp: credential.isBackedUp))
        return try await enrolments.enrol(enrolment, newActivation: nil) { sessionChallenge in
            guard let expected = Base64URL.decode(sessionChallenge), constantTimeEquals(expected, claimed) else {
                throw ManagerError(
                    .unauthorized, .signatureInvalid,
                    "the new passkey is refused: it was made for another session's challenge")
            }
        }
    }

    /// The challenge the browser's clientDataJSON names.
    private static func claimedChallenge(in clientData: Data) throws -> Data {
        struct Challenge: Decodable { var challenge: String }
        guard clientData.count <= WireLimit.webAuthnField,
            let signed = try? JSONDecoder().decode(Challenge.self, from: clientData),
            let bytes = Base64URL.decode(signed.challenge)
        else { throw ManagerError(.unauthorized, .signatureInvalid, "the passkey's clientDataJSON names no challenge") }
        return bytes
    }

    private static func passkey(
        _ party: RelyingParty, attestation: Data, clientData: Data, challenge: Data
    ) throws -> PasskeyCredential {
        do {
            return try party.verifyRegistration(
                attestationObject: attestation, clientDataJSON: clientData, challenge: challenge)
        } catch {
            throw ManagerError(.unauthorized, .signatureInvalid, "the new passkey is refused: \(error)")
        }
    }

    /// A login request as the approval page shows it, to whoever holds its id (which only the server's screen shows).
    public func viewConfirmation(
        _ request: ConfirmationViewRequest, from client: String?
    ) async throws -> ConfirmationViewMessage {
        if let client { try await rateLimiter.charge(.viewsPerAddress, key: client) }
        guard let record = try await database.read({ store in try await store.confirmation(request.confirmationId) })
        else {
            throw ManagerError(
                .notFound, .notFound,
                "no login request has this id; it ran out and was removed, or the link is cut short")
        }
        return ConfirmationViewMessage(
            confirmationId: record.id, host: record.hostName, service: record.service, loginName: record.loginName,
            remoteHost: record.remoteHost,
            tty: record.tty, createdAt: record.createdAt, expiresAt: record.expiresAt,
            state: record.state(at: Self.now()),
            endedBecause: confirmations.ending(of: record, in: record.state(at: Self.now())))
    }

    /// Approves a confirmation in one device-signed request: the proof, then the code (number matching, counted), then
    /// the PIN through the same claimed check and lockout as every login. The host's wait then answers `approved`.
    public func approveConfirmation(body: Data, signature: String?) async throws -> String {
        let request = try RequestBody.decode(ConfirmationApprovalRequest.self, from: body, "the approval")
        try rateLimiter.enforce(
            try await database.transaction(durability: .unsynced) { store in
                try await self.verifier.verifyDeviceSignature(
                    deviceId: request.deviceId, challenge: request.challenge, path: APIPath.confirmationApproval,
                    body: body, signature: signature,
                    in: store)
                return try await self.rateLimiter.countUse(.startsPerDevice, key: request.deviceId, in: store)
            })
        let confirmation = try await confirmations.checkCode(
            request.confirmationCode, confirmationId: request.confirmationId, deviceId: request.deviceId)
        let purpose = AuthenticationPurpose.confirmation(id: request.confirmationId)
        let service = try services.service(for: purpose)
        let requirement = max(configuration.requireHardwareKey, service.requireHardwareKey)
        let (device, activation) = try await ManagerMetrics.countingLockedLogins {
            try await database.transaction(durability: .unsynced) { store in
                try await DeviceEligibility.authenticatingDevice(request.deviceId, requirement: requirement, in: store)
            }
        }
        let pin = try pinChecker.open(
            request.sealedPin, for: .approval(confirmationId: request.confirmationId, challenge: request.challenge))
        // The audit names the service the host logs in to (sshd), not the manager's built-in one.
        let check = PINChecker.Purpose(
            service: confirmation.service, host: confirmation.hostName, actor: "device \(device.id)")
        let verdict = try await ManagerMetrics.countingLockedLogins {
            try await pinChecker.check(pin, ofDevice: device.id, activationId: activation.id, for: check)
        }
        var answer = ConfirmationApprovalMessage(
            nonce: request.nonce, confirmationId: request.confirmationId, outcome: .approved)
        if let lock = verdict.lockout {
            ManagerMetrics.login(.wrongPIN)
            answer.outcome = .lockout
            answer.lockout = lock
        } else {
            answer.host = try await confirmations.approve(
                request.confirmationId, by: device.id, of: activation.id, email: activation.email, at: service,
                role: "confirm"
            ).relyingPartyName
            ManagerMetrics.login(.success)
        }
        return try signer.sign(answer, type: SignedAnswerType.confirmationApproval)
    }
}
