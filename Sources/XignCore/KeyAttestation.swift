import FoundationEssentials
import XignCrypto
import XignDevice
import XignProtocol

/// TPM key attestation for a personalization or a host join (docs/design.md, "Proven hardware keys"): the maker's EK
/// certificate, a new attestation key, the manager's credential activated by the TPM, and the new key certified over
/// the credential's secret. A TPM that cannot attest says why; whether that is enough is the manager's to decide.
struct KeyAttestor {
    let tpm: TPMDeviceKeyStore
    let client: ManagerClient

    enum Purpose {
        case personalization(sessionId: String)
        case hostJoin(joinSecret: String)
    }

    /// The evidence for `key`, or nil for a key that is not in a TPM. Fails only when the manager cannot be reached.
    func evidence(for key: any DeviceKey, purpose: Purpose) throws -> AttestationEvidence? {
        guard let key = key as? TPMDeviceKey else { return nil }
        func missing(_ reason: String) -> AttestationEvidence {
            AttestationEvidence(attestation: nil, missingBecause: reason)
        }
        let endorsement: (slot: EndorsementKeySlot, der: Data)
        let attestationKey: TPMAttestationKey
        do {
            guard let first = try tpm.endorsementCertificates().first else {
                return missing("this TPM holds no endorsement-key certificate from its maker")
            }
            endorsement = first
            attestationKey = try tpm.createAttestationKey()
        } catch {
            return missing("the TPM could not start an attestation: \(error)")
        }
        var request = AttestationStartRequest(
            sessionId: nil, joinSecret: nil, endorsementCertificate: Base64URL.encode(endorsement.der),
            attestationKey: Base64URL.encode(attestationKey.publicArea))
        switch purpose {
        case .personalization(let sessionId): request.sessionId = sessionId
        case .hostJoin(let joinSecret): request.joinSecret = joinSecret
        }
        let challenge: AttestationChallengeMessage
        do { challenge = try client.post(APIPath.attestations, request) } catch let error as XignSdkError
            where !error.errorCode.isTransportFailure
        {
            return missing(error.message)
        }
        // Not a LimitedMessage: a refusal here fails the personalization, where any other refusal of the attestation
        // leaves the key unattested.
        guard challenge.attestationId.utf8.count <= WireLimit.identifier,
            let credential = Base64URL.decode(challenge.credentialBlob),
            let secret = Base64URL.decode(challenge.encryptedSecret), credential.count <= WireLimit.attestationSecret,
            secret.count <= WireLimit.attestationSecret
        else {
            throw XignSdkError(.invalidManagerResponse, "the manager's attestation challenge is malformed")
        }
        do {
            let released = try attestationKey.activateCredential(
                credential, encryptedSecret: secret, slot: endorsement.slot)
            let (attest, signature) = try attestationKey.certify(key, over: released)
            return AttestationEvidence(
                attestation: KeyAttestationMessage(
                    attestationId: challenge.attestationId, certifiedKey: Base64URL.encode(key.publicArea),
                    attest: Base64URL.encode(attest),
                    signature: Base64URL.encode(signature)),
                missingBecause: nil)
        } catch {
            return missing("the TPM could not answer the manager's attestation challenge: \(error)")
        }
    }

    /// The manager's finding about a key, in words safe to print.
    static func summary(attestedBy issuer: String?, notAttestedBecause reason: String?) -> String? {
        if let issuer { return "attested by \(DisplayText.sanitized(String(issuer.prefix(200))))" }
        return reason.map { "not attested: \(DisplayText.sanitized(String($0.prefix(400))))" }
    }
}
