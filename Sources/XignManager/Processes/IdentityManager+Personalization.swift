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
            try checkNewActivationTrigger(trigger, pin: pin)
            newActivation = (try makeActivation(pin: pin), trigger)
        }
        let device = NewEnrolment(
            sessionId: request.sessionId, mode: request.mode, nonce: request.nonce, deviceKey: request.deviceKey,
            keyKind: request.keyKind,
            information: request.device, passkey: nil, attestation: request.attestation)
        return try await enrol(device, newActivation: newActivation) { challenge in
            try RequestVerifier.checkSignature(
                rawSignature, by: deviceKey, of: .device, path: APIPath.personalizations, body: body,
                challenge: challenge)
        }
    }

    /// A device about to take the activation of a personalization session.
    struct NewEnrolment: Sendable {
        var sessionId: String
        var mode: PersonalizationMode
        var nonce: String
        /// base64url SubjectPublicKeyInfo.
        var deviceKey: String
        var keyKind: KeyKind
        var information: DeviceInformationMessage
        var passkey: ManagerStore.Passkey?
        var attestation: AttestationEvidence? = nil
    }

    /// Spends the session (after `prove` accepted the proof over its challenge) and enrols the device: for the activation
    /// the session opened, or for `newActivation`. Returns the signed personalization answer.
    func enrol(
        _ enrolment: NewEnrolment, newActivation: (ActivationSecrets, NewActivationMessage)?,
        proving prove: @escaping @Sendable (_ challenge: String) throws -> Void
    ) async throws -> String {
        let deviceId = try SecureRandom.identifier()
        guard let keyBytes = Base64URL.decode(enrolment.deviceKey),
            let key = try? P256PublicKey(derRepresentation: keyBytes)
        else {
            throw ManagerError.badRequest("deviceKey is not a base64url P-256 SubjectPublicKeyInfo")
        }
        let name = enrolment.information.name.prefix(64)
        let requirement = configuration.requireHardwareKey
        let (result, mailIds, finding) = try await database.transaction {
            store -> (PersonalizationResultMessage, [String], DeviceEligibility.KeyFinding?) in
            var activation = try await Self.claimSession(
                enrolment.sessionId, mode: enrolment.mode, in: store, proving: prove)
            let finding = try await self.finding(
                enrolment.attestation, of: key, kind: enrolment.keyKind, purpose: "session:\(enrolment.sessionId)",
                in: store)
            if requirement == .attested,
                let refusal = DeviceEligibility.refusal(
                    of: requirement, kind: enrolment.keyKind, synced: enrolment.passkey?.isSynced == true,
                    finding: finding, what: "device")
            {
                throw DeviceEligibility.securityInsufficient(
                    refusal, who: "this manager", then: "ask the administrator which devices it accepts")
            }
            let kind = DeviceEligibility.keyDescription(enrolment.keyKind, passkey: enrolment.passkey, finding: finding)
            var mailId: String?
            if let newActivation {
                let (fresh, trigger) = newActivation
                let count = try await store.activationCount(accountId: activation.accountId)
                let alias = trigger.alias ?? "Activation \(count + 1)"
                try await store.insertActivation(
                    fresh.record(accountId: activation.accountId, alias: alias, deviceId: deviceId, validFor: 0))
                if trigger.shouldSendEmail {
                    mailId = try await self.mail.queue(
                        Outbox.activationMail(
                            to: activation.email, alias: alias, payload: self.payload(for: fresh), backup: true),
                        in: store
                    )
                }
                // The data that led here is used up, like any that personalizes.
                _ = try await store.replaceSecret(
                    activationId: activation.id, hash: activation.secretHash, validUntil: 0)
                activation.id = fresh.id
                activation.alias = alias
            } else {
                try await store.personalize(activationId: activation.id, deviceId: deviceId)
                try await self.finishFirstPersonalization(accountId: activation.accountId, in: store)
            }
            try await store.insertDevice(
                ManagerStore.NewDevice(
                    id: deviceId, activationId: activation.id, publicKey: enrolment.deviceKey,
                    keyKind: enrolment.keyKind,
                    name: enrolment.information.name, platform: enrolment.information.platform, createdAt: Self.now(),
                    passkey: enrolment.passkey,
                    ekIssuer: finding?.ekIssuer, unattestedBecause: finding?.unattestedBecause
                ))
            let credential =
                enrolment.passkey.map { ", credential \($0.credentialId.prefix(64)), authenticator \($0.aaguid)" } ?? ""
            try await store.recordAudit(
                AuditEvent(
                    .enrolment, email: activation.email, activationId: activation.id,
                    detail: "\(enrolment.mode.rawValue): \(kind), device \(name)\(credential)",
                    actor: "device \(deviceId)"
                ))
            let result = PersonalizationResultMessage(
                nonce: enrolment.nonce, deviceId: deviceId, activationId: activation.id,
                activationAlias: activation.alias,
                accountEmail: activation.email, deviceKey: enrolment.deviceKey,
                // With a new activation the PIN typed here is not the one it logs in with: its verifier waits for the first login.
                offline: newActivation == nil
                    ? self.offlinePolicy(keyKind: enrolment.keyKind, reportedThrough: 0, of: activation) : nil,
                attestedBy: finding?.ekIssuer, notAttestedBecause: finding?.unattestedBecause
            )
            let device = "\(name) (\(enrolment.information.platform.prefix(64)), \(kind))"
            let notice = try await self.mail.queue(
                Outbox.deviceNotice(to: activation.email, alias: activation.alias, device: device, added: true),
                in: store)
            return (result, [mailId, notice].compactMap { $0 }, finding)
        }
        for id in mailIds { await mail.deliver(id: id) }
        logger.info(
            "device personalized",
            metadata: [
                "activation": "\(result.activationId)", "device": "\(deviceId)", "mode": "\(enrolment.mode.rawValue)",
                "keyKind": "\(enrolment.keyKind.rawValue)", "attestedBy": "\(finding?.ekIssuer ?? "-")",
            ])
        return try signer.sign(result, type: SignedAnswerType.personalization)
    }

    /// The session a request continues, checked and spent: `prove` accepted the new key's proof over its challenge, the
    /// mode continues its outcome, and the activation is still valid. Returns that activation.
    private static func claimSession(
        _ sessionId: String, mode: PersonalizationMode, in store: ManagerStore,
        proving prove: (_ challenge: String) throws -> Void
    ) async throws -> ManagerStore.ActivationRecord {
        guard let session = try await store.personalizationSession(sessionId) else {
            throw ManagerError(
                .conflict, .sessionInvalid,
                "the personalization session is unknown or was used; start again from the activation data")
        }
        guard session.expiresAt > now() else {
            throw ManagerError(
                .conflict, .sessionInvalid, "the personalization session expired; start again from the activation data")
        }
        try prove(session.challenge)
        guard try await store.consumePersonalizationSession(sessionId, challenge: session.challenge) else {
            throw ManagerError(.conflict, .challengeInvalid, "the challenge was already used")
        }
        let outcome = session.outcome
        let allowed: Bool
        switch mode {
        case .new: allowed = outcome == .newPersonalization || outcome == .mergePersonalization
        case .override: allowed = outcome == .rePersonalization || outcome == .alreadyPersonalized
        case .newActivation: allowed = outcome == .rePersonalization
        }
        guard allowed else {
            throw ManagerError(
                .conflict, .sessionInvalid, "mode \(mode.rawValue) does not continue a \(outcome.rawValue) session")
        }
        guard let activation = try await store.activation(id: session.activationId), activation.state != .revoked,
            !activation.permanentlyLocked
        else {
            throw ManagerError(.gone, .activationRevoked, "this activation was removed or locked meanwhile")
        }
        // Another session of the same data personalized first (or the administrator reissued the data meanwhile).
        guard activation.secretValidUntil > now() else {
            throw ManagerError(
                .conflict, .sessionInvalid, "this activation data was used meanwhile; ask for new activation data")
        }
        return activation
    }

    /// The account is permanent from now on; attributes kept for a linked service are handed over and deleted.
    private func finishFirstPersonalization(accountId: String, in store: ManagerStore) async throws {
        try await store.makePermanent(accountId: accountId)
        guard let kept = try await store.keptAttributes(accountId: accountId) else { return }
        if let service = kept.service, configuration.linkedServices.contains(service) {
            let directory = "\(mail.outbox.path)/linked/\(service)"
            try AtomicFile.makeDirectory(directory, mode: 0o700)
            try AtomicFile.write(Data(kept.attributes.utf8), to: "\(directory)/\(accountId).json", mode: 0o600)
        }
        try await store.forgetKeptAttributes(accountId: accountId)
    }
}
