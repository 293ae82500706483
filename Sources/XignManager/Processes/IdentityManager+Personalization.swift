import Foundation
import XignCrypto
import XignProtocol

/// Personalization: the activation PIN check with its five outcomes, then the device-signed personalization.
extension IdentityManager {
    /// Answers the activation PIN check of a personalization with one of the five outcomes.
    public func decrypt(_ request: DecryptRequest, from client: String?) async throws -> String {
        if let client { try await rateLimiter.charge(.decryptsPerAddress, key: client) }
        let presentedSecretHash = Data(Self.hashed(request.activationSecret).utf8)
        let purpose = PINChecker.Purpose(
            service: "personalization", host: nil, actor: "activation data from \(client ?? "unknown address")")
        let now = Self.now()
        let pin = try pinChecker.open(
            request.sealedPin, for: .decrypt(activationId: request.activationId, nonce: request.nonce))
        let verdict = try await pinChecker.check(pin, activationId: request.activationId, for: purpose) { activation in
            guard let activation, constantTimeEquals(Data(activation.secretHash.utf8), presentedSecretHash) else {
                throw ManagerError(
                    .notFound, .activationNotFound,
                    "no activation matches this activation data; check the link or register again")
            }
            // Before the PIN is looked at, so used or old data tests no PIN and locks nothing. (A removed
            // activation is said to be removed, by the claim.)
            if activation.state != .revoked, activation.secretValidUntil <= now {
                throw ManagerError(
                    .gone, .activationNotFound,
                    activation.secretValidUntil == 0
                        ? "this activation data was used already: a personalization voids it. Add this machine with `xign-setup new-activation` on an enrolled one, or ask your administrator for new activation data"
                        : "this activation data expired; ask your administrator for new activation data (xign-manager admin reissue)"
                )
            }
            return activation
        }
        let activation = verdict.activation
        if let lock = verdict.lockout {
            var locked = DecryptResult(nonce: request.nonce, outcome: .lockout, activationId: activation.id)
            locked.lockout = lock
            return try signer.sign(locked, type: SignedAnswerType.decrypt, includeKey: true)
        }
        let known = Set(request.knownDeviceIds)
        let sessionLifetime = configuration.sessionLifetimeMilliseconds
        let result = try await database.transaction { store -> DecryptResult in
            var result = DecryptResult(nonce: request.nonce, outcome: .newPersonalization, activationId: activation.id)
            result.accountEmail = activation.email
            result.activationAlias = activation.alias
            if activation.state == .personalized, let device = activation.deviceId, known.contains(device) {
                result.outcome = .alreadyPersonalized
                result.personalizedDeviceId = device
            } else if activation.everPersonalized {
                result.outcome = .rePersonalization
                result.personalizedDeviceId = activation.deviceId
                result.pinSpec = self.configuration.pinPolicy
                result.aliasSpec = self.configuration.aliasPolicy
                result.canSendEmail = true
            } else if activation.isTemporary,
                let merge = try await Self.mergeCandidate(for: activation, known: known, in: store)
            {
                result.outcome = .mergePersonalization
                result.merge = merge
            }
            let session = SessionMessage(
                id: try SecureRandom.identifier(), challenge: try SecureRandom.token(),
                expiresAt: Self.now() + sessionLifetime)
            try await store.insertPersonalizationSession(
                session, activationId: activation.id, outcome: result.outcome,
                mergeDeviceId: result.merge?.existingDeviceId)
            result.session = session
            return result
        }
        logger.info(
            "activation PIN accepted",
            metadata: ["activation": "\(activation.id)", "outcome": "\(result.outcome.rawValue)"])
        return try signer.sign(result, type: SignedAnswerType.decrypt, includeKey: true)
    }

    /// An organization invite scanned on a machine that already holds an activation of another, permanent account.
    private static func mergeCandidate(
        for activation: ManagerStore.ActivationRecord, known: Set<String>, in store: ManagerStore
    ) async throws -> MergeMessage? {
        for deviceId in known.sorted() {
            if let email = try await store.otherAccountEmail(ofDevice: deviceId, notAccount: activation.accountId) {
                return MergeMessage(
                    existingDeviceId: deviceId, existingAccountEmail: email, invitedEmail: activation.email,
                    organization: activation.organization ?? "")
            }
        }
        return nil
    }

    /// Finishes a personalization. The request is signed with the new device key over the session's challenge,
    /// which is consumed in the same transaction, so a replay finds no challenge.
    public func personalize(body: Data, signature: String?) async throws -> String {
        let request = try RequestBody.decode(PersonalizeRequest.self, from: body, "the personalization request")
        guard let keyBytes = Base64URL.decode(request.deviceKey),
            let deviceKey = try? P256PublicKey(derRepresentation: keyBytes)
        else {
            throw ManagerError.badRequest("deviceKey is not a base64url P-256 SubjectPublicKeyInfo")
        }
        let rawSignature = try RequestVerifier.signature(from: signature)
        guard request.keyKind != .passkey else {
            throw ManagerError.badRequest(
                "keyKind passkey is a browser's; a browser personalizes at \(APIPath.passkeyPersonalizations)")
        }
        if configuration.requireHardwareKey >= .claimed && request.keyKind == .software {
            throw ManagerError(
                .forbidden, .securityInsufficient,
                "this manager accepts only hardware-bound (TPM) device keys; enable the TPM and personalize again")
        }
        var newActivation: (ActivationSecrets, NewActivationMessage)?
        if request.mode == .newActivation {
            guard let trigger = request.newActivation else {
                throw ManagerError.badRequest("mode newActivation needs newActivation with a PIN")
            }
            let pin = try pinChecker.open(trigger.sealedPin, for: .personalization(sessionId: request.sessionId))
            try accountChanges.checkNewActivationTrigger(trigger, pin: pin)
            newActivation = (try activations.makeActivation(pin: pin), trigger)
        }
        let device = Enrolments.NewEnrolment(
            sessionId: request.sessionId, mode: request.mode, nonce: request.nonce, deviceKey: request.deviceKey,
            keyKind: request.keyKind,
            information: request.device, passkey: nil, attestation: request.attestation)
        return try await enrolments.enrol(device, newActivation: newActivation) { challenge in
            try RequestVerifier.checkSignature(
                rawSignature, by: deviceKey, of: .device, path: APIPath.personalizations, body: body,
                challenge: challenge)
        }
    }
}
