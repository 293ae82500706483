import FoundationEssentials
import XignCrypto

// Hosts: servers that hold no key of their users and ask the manager for login confirmations.
// docs/protocol.md, "Hosts", describes the join; docs/openapi.yaml is the schema.

extension APIPath {
    /// Join with a one-time token; signed by the new host key.
    public static let hosts = "/v1/hosts"
}

extension SignedAnswerType {
    public static let hostJoin = "xign-host-join+jwt"
}

/// What an administrator hands to a new host (`xign-manager admin hosts add NAME`): a one-time secret and the
/// fingerprint of the manager key, so the host pins the right key at its first answer. Text form:
/// `xhj1.<secret>.<fingerprint>`, both base64url.
public struct HostJoinToken: Sendable, Equatable, CustomStringConvertible {
    public static let prefix = "xhj1"
    public let secret: String
    public let managerKeyFingerprint: String

    public init(secret: String, managerKeyFingerprint: String) {
        self.secret = secret
        self.managerKeyFingerprint = managerKeyFingerprint
    }

    public struct Malformed: Error, CustomStringConvertible {
        public var description: String {
            "this is not a host join token (it looks like xhj1.<secret>.<fingerprint>); ask the administrator for the line `xign-manager admin hosts add` printed"
        }
    }

    /// Parses the text form; surrounding white space (a pasted line) is ignored.
    public init(parsing text: String) throws {
        let trimmed = text.split(whereSeparator: { $0.isWhitespace })
        guard trimmed.count == 1, trimmed[0].utf8.count <= 128 else { throw Malformed() }
        let parts = trimmed[0].split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == Self.prefix, (16...64).contains(parts[1].utf8.count),
            parts[2].utf8.count == 43,
            parts[1...].allSatisfy({ Base64URL.decode(String($0)) != nil })
        else { throw Malformed() }
        self.init(secret: String(parts[1]), managerKeyFingerprint: String(parts[2]))
    }

    public var description: String { "\(Self.prefix).\(secret).\(managerKeyFingerprint)" }
}

/// The join request. Its signature (`X-Xign-Signature`) is the new host key's over the canonical request with the
/// join secret as the challenge, which proves the host holds the key it registers.
public struct HostJoinRequest: Codable, Equatable, Sendable {
    public var joinSecret: String
    /// base64url SubjectPublicKeyInfo of the P-256 host key.
    public var hostKey: String
    public var keyKind: KeyKind
    public var nonce: String
    /// With a TPM key: its attestation, or why there is none.
    public var attestation: AttestationEvidence?

    public init(
        joinSecret: String, hostKey: String, keyKind: KeyKind, nonce: String, attestation: AttestationEvidence? = nil
    ) {
        self.attestation = attestation
        self.joinSecret = joinSecret
        self.hostKey = hostKey
        self.keyKind = keyKind
        self.nonce = nonce
    }
}

/// The signed join answer (its header carries the manager key as `spki`).
public struct HostJoinResult: Codable, Equatable, Sendable {
    public var nonce: String
    public var hostId: String
    /// The name the administrator gave the host.
    public var name: String
    public var hostKey: String
    /// What the manager found a TPM host key to be: the EK issuer it was attested with, or why it is not attested.
    public var attestedBy: String?
    public var notAttestedBecause: String?

    public init(
        nonce: String, hostId: String, name: String, hostKey: String, attestedBy: String? = nil,
        notAttestedBecause: String? = nil
    ) {
        self.attestedBy = attestedBy
        self.notAttestedBecause = notAttestedBecause
        self.nonce = nonce
        self.hostId = hostId
        self.name = name
        self.hostKey = hostKey
    }
}

extension HostJoinRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("joinSecret", joinSecret, maximum: WireLimit.identifier)
        try Limit.text("nonce", nonce, maximum: WireLimit.nonce)
    }
}

extension HostJoinResult: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.plainIdentifier("hostId", hostId)
        try Limit.text("name", name, maximum: WireLimit.hostName)
    }
}
