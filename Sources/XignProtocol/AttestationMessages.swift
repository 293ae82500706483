import FoundationEssentials

extension APIPath {
    /// A TPM attestation starts: the manager answers with a credential for the attestation key.
    public static let attestations = "/v1/attestations"
    /// Whether an EK certificate chains to a CA this manager trusts (`xign-setup doctor`).
    public static let endorsementChecks = "/v1/endorsement-checks"
}

/// The start of a TPM key attestation, within a personalization session or a host join. The attestation key (AK) is
/// new, made in the TPM for this attestation only.
public struct AttestationStartRequest: Codable, Equatable, Sendable {
    /// The personalization session the device key is for, or else the host join secret.
    public var sessionId: String?
    public var joinSecret: String?
    /// The EK certificate from the TPM's NV storage, DER, base64url.
    public var endorsementCertificate: String
    /// The AK's TPM2B_PUBLIC, base64url.
    public var attestationKey: String

    public init(sessionId: String?, joinSecret: String?, endorsementCertificate: String, attestationKey: String) {
        (self.sessionId, self.joinSecret) = (sessionId, joinSecret)
        (self.endorsementCertificate, self.attestationKey) = (endorsementCertificate, attestationKey)
    }
}

/// The manager's credential: a secret only the TPM holding that EK releases, and only to that AK
/// (TPM2_ActivateCredential). The AK then certifies the new key over the secret.
public struct AttestationChallengeMessage: Codable, Equatable, Sendable {
    public var attestationId: String
    /// TPM2B_ID_OBJECT, base64url.
    public var credentialBlob: String
    /// TPM2B_ENCRYPTED_SECRET, base64url.
    public var encryptedSecret: String

    public init(attestationId: String, credentialBlob: String, encryptedSecret: String) {
        (self.attestationId, self.credentialBlob, self.encryptedSecret) = (
            attestationId, credentialBlob, encryptedSecret
        )
    }
}

/// The proof that goes with a personalization or a host join: TPM2_Certify of the new key by the AK, over the
/// activated secret.
public struct KeyAttestationMessage: Codable, Equatable, Sendable {
    public var attestationId: String
    /// The certified key's TPM2B_PUBLIC, base64url; its point must be the key the request registers.
    public var certifiedKey: String
    /// The TPMS_ATTEST the TPM made, base64url.
    public var attest: String
    /// The AK's ECDSA P-256 signature of `attest`, r || s, base64url.
    public var signature: String

    public init(attestationId: String, certifiedKey: String, attest: String, signature: String) {
        (self.attestationId, self.certifiedKey, self.attest, self.signature) = (
            attestationId, certifiedKey, attest, signature
        )
    }
}

/// A device's or host's word on its key's attestation: the proof, or why there is none (the TPM has no EK
/// certificate, or failed). The manager decides what the key counts as.
public struct AttestationEvidence: Codable, Equatable, Sendable {
    public var attestation: KeyAttestationMessage?
    /// The manager keeps at most 400 characters of it, with control characters removed.
    public var missingBecause: String?

    public init(attestation: KeyAttestationMessage?, missingBecause: String?) {
        (self.attestation, self.missingBecause) = (attestation, missingBecause)
    }
}

public struct EndorsementCheckRequest: Codable, Equatable, Sendable {
    public var endorsementCertificate: String
    public init(endorsementCertificate: String) { self.endorsementCertificate = endorsementCertificate }
}

/// Whether the manager would accept an EK certificate, and if not, why.
public struct EndorsementCheckMessage: Codable, Equatable, Sendable {
    public var issuer: String
    public var accepted: Bool
    public var refusal: String?

    public init(issuer: String, accepted: Bool, refusal: String?) {
        (self.issuer, self.accepted, self.refusal) = (issuer, accepted, refusal)
    }
}

extension AttestationStartRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.require(
            (sessionId == nil) != (joinSecret == nil), "sessionId",
            "or joinSecret, exactly one of them, names what is attested")
        try Limit.text("sessionId", sessionId, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.text("joinSecret", joinSecret, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.text(
            "endorsementCertificate", endorsementCertificate, maximum: WireLimit.endorsementCertificate,
            allowsEmpty: true)
        try Limit.text("attestationKey", attestationKey, maximum: WireLimit.attestationKey, allowsEmpty: true)
    }
}

extension EndorsementCheckRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text(
            "endorsementCertificate", endorsementCertificate, maximum: WireLimit.endorsementCertificate,
            allowsEmpty: true)
    }
}
