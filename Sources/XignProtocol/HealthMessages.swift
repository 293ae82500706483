import FoundationEssentials

public struct HealthMessage: Codable, Equatable, Sendable {
    public var status: String
    public var version: String
    public var managerKeyFingerprint: String
    /// The signing key itself (SPKI DER, base64url). A client checks it against the fingerprint it pinned.
    /// Optional to decode, so a client can tell a manager older than sealed PINs by its absence.
    public var managerKey: String?
    /// The key PINs are sealed to: a JWS (`SignedAnswerType.pinSealingKey`) of a `PINSealingKeyMessage`, signed by
    /// `managerKey`. Absent from managers before it had a key of its own.
    public var pinSealingKey: String?

    public init(
        status: String, version: String, managerKeyFingerprint: String, managerKey: String, pinSealingKey: String?
    ) {
        self.status = status
        self.version = version
        self.managerKeyFingerprint = managerKeyFingerprint
        self.managerKey = managerKey
        self.pinSealingKey = pinSealingKey
    }
}

/// The signed statement of the manager's PIN-sealing key.
public struct PINSealingKeyMessage: Codable, Equatable, Sendable {
    /// SPKI DER, base64url.
    public var key: String

    public init(key: String) { self.key = key }
}
