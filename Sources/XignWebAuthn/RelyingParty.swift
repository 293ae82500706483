import FoundationEssentials
import XignCrypto

/// The manager as a WebAuthn relying party: its origin (scheme, host and port of its public URL) and its RP id (the
/// host). Every ceremony is checked against both, so a passkey made for another site, or an assertion a page of
/// another origin obtained, is refused.
public struct RelyingParty: Sendable, Equatable {
    public let id: String
    public let origin: String
    let idHash: Data

    /// `origin` is `scheme://host[:port]`, as a browser writes it into clientDataJSON; `id` is its host.
    public init(origin: String, id: String) {
        self.origin = origin
        self.id = id
        idHash = SHA256.hash(id)
    }

    /// A new credential (`navigator.credentials.create`) for `challenge`: attestation `none`, ES256, the user present
    /// and verified. The key is whatever the authenticator made for this origin; no attestation vouches for its maker.
    public func verifyRegistration(
        attestationObject: Data, clientDataJSON: Data, challenge: Data
    ) throws(WebAuthnError) -> PasskeyCredential {
        try check(ClientData(clientDataJSON), type: "webauthn.create", challenge: challenge)
        guard attestationObject.count <= AuthenticatorData.maximumLength + 512 else {
            throw .malformed("the attestation object is too long")
        }
        let object = try CBORReader.decode(attestationObject)
        guard case .text(let format)? = object[.text("fmt")], case .bytes(let rawData)? = object[.text("authData")]
        else {
            throw .malformed("the attestation object lacks fmt or authData")
        }
        guard format == "none", object[.text("attStmt")] == .map([]) else {
            throw .refused(
                "attestation format '\(format.prefix(32))' is not accepted; the page asks for attestation none")
        }
        let data = try AuthenticatorData(rawData)
        try check(data)
        guard let credential = data.attestedCredential else {
            throw .malformed("the authenticator data of a new credential holds no credential")
        }
        return PasskeyCredential(
            id: credential.id, publicKey: credential.publicKey, aaguid: credential.aaguid, signCount: data.signCount,
            isBackupEligible: data.flags.contains(.backupEligible), isBackedUp: data.flags.contains(.backedUp))
    }

    /// An assertion (`navigator.credentials.get`) by the credential whose key is `publicKey`, over `challenge`. The
    /// counter must have grown past `storedSignCount` unless the authenticator keeps none (both zero): one that went
    /// back or stood still means a copied authenticator or a replay.
    public func verifyAssertion(
        _ assertion: PasskeyAssertion, publicKey: P256PublicKey, challenge: Data, storedSignCount: UInt32
    ) throws(WebAuthnError) -> AssertionResult {
        try check(ClientData(assertion.clientDataJSON), type: "webauthn.get", challenge: challenge)
        let data = try AuthenticatorData(assertion.authenticatorData)
        try check(data)
        guard let raw = ECDSASignature.raw(fromDER: assertion.signature),
            publicKey.isValidSignature(raw, for: data.raw + SHA256.hash(assertion.clientDataJSON))
        else { throw .refused("the passkey's signature does not verify") }
        guard (data.signCount == 0 && storedSignCount == 0) || data.signCount > storedSignCount else {
            throw .refused(
                "the passkey's signature counter did not grow (\(data.signCount) after \(storedSignCount)): a replay or a copied authenticator"
            )
        }
        return AssertionResult(
            signCount: data.signCount, isBackupEligible: data.flags.contains(.backupEligible),
            isBackedUp: data.flags.contains(.backedUp))
    }

    private func check(_ client: ClientData, type: String, challenge: Data) throws(WebAuthnError) {
        guard client.type == type else {
            throw .refused("the clientDataJSON is for '\(client.type.prefix(32))', not \(type)")
        }
        guard let signed = Base64URL.decode(client.challenge), constantTimeEquals(signed, challenge) else {
            throw .refused("the passkey signed another challenge")
        }
        guard client.origin == origin else {
            throw .refused("the passkey was used from another origin (\(client.origin.prefix(128)))")
        }
        guard client.crossOrigin != true else {
            throw .refused("the passkey was used inside a frame of another origin")
        }
    }

    private func check(_ data: AuthenticatorData) throws(WebAuthnError) {
        guard constantTimeEquals(data.rpIdHash, idHash) else {
            throw .refused("the passkey belongs to another site (RP id)")
        }
        guard data.flags.contains(.userPresent) else {
            throw .refused("the authenticator did not see the user (UP flag)")
        }
        guard data.flags.contains(.userVerified) else {
            throw .refused(
                "the authenticator did not verify the user (UV flag); use a passkey with a screen lock, PIN or biometrics"
            )
        }
        guard data.flags.contains(.backupEligible) || !data.flags.contains(.backedUp) else {
            throw .malformed("the authenticator data says backed up but not backup eligible")
        }
    }
}

/// A passkey made for us: what the manager records of it.
public struct PasskeyCredential: Sendable {
    public let id: Data
    public let publicKey: P256PublicKey
    public let aaguid: Data
    public let signCount: UInt32
    public let isBackupEligible: Bool
    public let isBackedUp: Bool
}

/// What a verified assertion updates: the counter, and whether the credential is backed up by now.
public struct AssertionResult: Sendable, Equatable {
    public let signCount: UInt32
    /// Fixed for a credential's life (WebAuthn L3 §6.1.3): one that changes is another authenticator.
    public let isBackupEligible: Bool
    public let isBackedUp: Bool
}

/// An assertion as it travels in `X-Xign-Signature`: `webauthn.` and the authenticator data, the clientDataJSON and
/// the DER signature, each in base64url, joined with dots.
public struct PasskeyAssertion: Sendable {
    public static let prefix = "webauthn."
    public static let maximumHeaderLength = 8192

    public let authenticatorData: Data
    public let clientDataJSON: Data
    public let signature: Data

    public init(authenticatorData: Data, clientDataJSON: Data, signature: Data) {
        self.authenticatorData = authenticatorData
        self.clientDataJSON = clientDataJSON
        self.signature = signature
    }

    /// Nil when `header` is not in this form at all; an error when it is, but broken.
    public init?(header: String) throws(WebAuthnError) {
        guard header.hasPrefix(Self.prefix) else { return nil }
        guard header.utf8.count <= Self.maximumHeaderLength else {
            throw .malformed("the passkey assertion is too long")
        }
        let parts = header.dropFirst(Self.prefix.count).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let data = Base64URL.decode(String(parts[0])),
            let client = Base64URL.decode(String(parts[1])),
            let signature = Base64URL.decode(String(parts[2])), signature.count <= 80
        else {
            throw .malformed(
                "the passkey assertion is not webauthn.<authenticatorData>.<clientDataJSON>.<signature> in base64url")
        }
        self.init(authenticatorData: data, clientDataJSON: client, signature: signature)
    }

    public var header: String {
        Self.prefix + [authenticatorData, clientDataJSON, signature].map(Base64URL.encode).joined(separator: ".")
    }
}
