import Foundation
import Logging
import NIOPosix
import XignCrypto
import XignManagerConfiguration
import XignProtocol

/// A device takes an activation: the personalization session is spent, what attestation proved is judged, and the
/// device, its audit and its notice are written in one transaction. Personalization with a key and with a passkey
/// both end here.
struct Enrolments: Sendable {
    let database: Database
    let configuration: ManagerConfiguration
    let attestations: AttestationVerifier
    let activations: Activations
    let offline: OfflineLogins
    let mail: MailQueue
    let signer: AnswerSigner
    let logger: Logger

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
        _ enrolment: NewEnrolment, newActivation: (IdentityManager.ActivationSecrets, NewActivationMessage)?,
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
            let finding = try await self.attestations.finding(
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
                            to: activation.email, alias: alias, payload: self.activations.payload(for: fresh),
                            backup: true),
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
                    name: enrolment.information.name, platform: enrolment.information.platform,
                    createdAt: IdentityManager.now(),
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
                    ? self.offline.policy(keyKind: enrolment.keyKind, reportedThrough: 0, of: activation) : nil,
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
        guard session.expiresAt > IdentityManager.now() else {
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
        guard activation.secretValidUntil > IdentityManager.now() else {
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
            // The write's fsync waits on the thread pool, not on the event loop the transaction may run on.
            try await NIOThreadPool.singleton.runIfActive {
                try AtomicFile.makeDirectory(directory, mode: 0o700)
                try AtomicFile.write(Data(kept.attributes.utf8), to: "\(directory)/\(accountId).json", mode: 0o600)
            }
        }
        try await store.forgetKeptAttributes(accountId: accountId)
    }
}
