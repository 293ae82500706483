import FoundationEssentials
import XignCrypto

// The manager's HTTP API, version 1. docs/protocol.md describes each message; docs/openapi.yaml is the schema.
// Times on the wire are milliseconds since the Unix epoch.

public enum APIPath {
    public static let health = "/health"
    public static let registrationParameters = "/v1/registration/parameters"
    public static let registrations = "/v1/registrations"
    public static let personalizationDecrypt = "/v1/personalization/decrypt"
    public static let personalizations = "/v1/personalizations"
    public static let challenges = "/v1/challenges"
    public static let deviceRevocations = "/v1/devices/revoke"
}

/// The media type of a signed (JWS) answer.
public enum SignedAnswerType {
    public static let decrypt = "xign-decrypt+jwt"
    public static let personalization = "xign-personalization+jwt"
    public static let revocation = "xign-revocation+jwt"
    public static let pinSealingKey = "xign-pin-sealing-key+jwt"
}

// MARK: Registration

public struct PinPolicyMessage: Codable, Equatable, Sendable {
    public var minLength: Int
    public var maxLength: Int
    public var digitsOnly: Bool
    /// The longest allowed run of consecutive ascending or descending digits (e.g. 3 allows "123", refuses "1234").
    public var maxSequenceLength: Int
    /// The longest allowed run of one repeated digit (e.g. 2 allows "11", refuses "111").
    public var maxSimilarDigits: Int
    public var blacklist: [String]

    public init(minLength: Int, maxLength: Int, digitsOnly: Bool, maxSequenceLength: Int, maxSimilarDigits: Int, blacklist: [String]) {
        self.minLength = minLength
        self.maxLength = maxLength
        self.digitsOnly = digitsOnly
        self.maxSequenceLength = maxSequenceLength
        self.maxSimilarDigits = maxSimilarDigits
        self.blacklist = blacklist
    }
}

public struct AliasPolicyMessage: Codable, Equatable, Sendable {
    public var minLength: Int
    public var maxLength: Int

    public init(minLength: Int, maxLength: Int) {
        self.minLength = minLength
        self.maxLength = maxLength
    }
}

public struct AttributeMessage: Codable, Equatable, Sendable {
    public var name: String
    public var isRequired: Bool

    public init(name: String, isRequired: Bool) {
        self.name = name
        self.isRequired = isRequired
    }
}

public struct CategoryMessage: Codable, Equatable, Sendable {
    public var id: String
    /// anonymous, email, phone, idCard.
    public var types: [String]
    public var attributes: [AttributeMessage]
    public var identificationAttributes: [String]

    public init(id: String, types: [String], attributes: [AttributeMessage], identificationAttributes: [String]) {
        self.id = id
        self.types = types
        self.attributes = attributes
        self.identificationAttributes = identificationAttributes
    }
}

public struct RegistrationParametersMessage: Codable, Equatable, Sendable {
    public var pinSpec: PinPolicyMessage
    public var categories: [CategoryMessage]
    public var alias: AliasPolicyMessage
    /// Echoed when the request named a linked service the manager knows; nil otherwise.
    public var serviceMappingId: String?

    public init(pinSpec: PinPolicyMessage, categories: [CategoryMessage], alias: AliasPolicyMessage, serviceMappingId: String?) {
        self.pinSpec = pinSpec
        self.categories = categories
        self.alias = alias
        self.serviceMappingId = serviceMappingId
    }
}

public struct RegisterRequest: Codable, Equatable, Sendable {
    public var categoryId: String
    /// Bound to `PINBinding.registration`.
    public var sealedPin: SealedPINMessage
    public var attributes: [String: String]
    public var alias: String?
    public var serviceMappingId: String?
    public var arbitraryUserAttributes: [String: String]?

    public init(
        categoryId: String, sealedPin: SealedPINMessage, attributes: [String: String], alias: String?,
        serviceMappingId: String?, arbitraryUserAttributes: [String: String]?
    ) {
        self.categoryId = categoryId
        self.sealedPin = sealedPin
        self.attributes = attributes
        self.alias = alias
        self.serviceMappingId = serviceMappingId
        self.arbitraryUserAttributes = arbitraryUserAttributes
    }
}

public struct RegisterResponse: Codable, Equatable, Sendable {
    public var managerUrl: String
    public var activationAlias: String

    public init(managerUrl: String, activationAlias: String) {
        self.managerUrl = managerUrl
        self.activationAlias = activationAlias
    }
}

/// Per-attribute server verdicts, as RegistrationInformation.error in the SDKs.
public enum AttributeErrorCode: String, Codable, Sendable, CaseIterable {
    case none, invalid, notAvailable, required
}

// MARK: Personalization

/// What the machine tells the manager about itself (Nevis's DeviceInformation).
public struct DeviceInformationMessage: Codable, Equatable, Sendable {
    public var name: String
    public var platform: String

    public init(name: String, platform: String) {
        self.name = name
        self.platform = platform
    }
}

public struct DecryptRequest: Codable, Equatable, Sendable {
    public var activationId: String
    public var activationSecret: String
    /// Bound to `PINBinding.decrypt`.
    public var sealedPin: SealedPINMessage
    /// Fresh client nonce; the signed answer must echo it.
    public var nonce: String
    /// Device ids this machine already holds at this manager, so the manager can tell
    /// alreadyPersonalized and mergePersonalization from the other cases.
    public var knownDeviceIds: [String]

    public init(activationId: String, activationSecret: String, sealedPin: SealedPINMessage, nonce: String, knownDeviceIds: [String]) {
        self.activationId = activationId
        self.activationSecret = activationSecret
        self.sealedPin = sealedPin
        self.nonce = nonce
        self.knownDeviceIds = knownDeviceIds
    }
}

public enum PersonalizationOutcome: String, Codable, Sendable, CaseIterable {
    case newPersonalization, rePersonalization, alreadyPersonalized, mergePersonalization, lockout
}

public struct LockoutMessage: Codable, Equatable, Sendable {
    public var isPermanent: Bool
    /// For a permanent lock this is the time the lock was set.
    public var lockedUntil: Int64
    public var failedAttempts: Int
    /// The manager's clock when it answered. A client counts the wait from `lockedUntil - issuedAt`,
    /// so a host clock that differs from the manager's neither shortens nor stretches a lock.
    public var issuedAt: Int64

    public init(isPermanent: Bool, lockedUntil: Int64, failedAttempts: Int, issuedAt: Int64) {
        self.isPermanent = isPermanent
        self.lockedUntil = lockedUntil
        self.failedAttempts = failedAttempts
        self.issuedAt = issuedAt
    }

    /// How long the lock still holds when the manager answered; never negative.
    public var remainingMilliseconds: Int64 { max(0, lockedUntil.subtractingReportingOverflow(issuedAt).partialValue) }
}

public struct SessionMessage: Codable, Equatable, Sendable {
    public var id: String
    /// Single use; the next device-signed request covers it.
    public var challenge: String
    public var expiresAt: Int64

    public init(id: String, challenge: String, expiresAt: Int64) {
        self.id = id
        self.challenge = challenge
        self.expiresAt = expiresAt
    }
}

public struct MergeMessage: Codable, Equatable, Sendable {
    /// The local device whose account the new registration could be merged into.
    public var existingDeviceId: String
    public var existingAccountEmail: String
    public var invitedEmail: String
    public var organization: String

    public init(existingDeviceId: String, existingAccountEmail: String, invitedEmail: String, organization: String) {
        self.existingDeviceId = existingDeviceId
        self.existingAccountEmail = existingAccountEmail
        self.invitedEmail = invitedEmail
        self.organization = organization
    }
}

/// The signed payload of a decrypt answer.
public struct DecryptResult: Codable, Equatable, Sendable {
    public var nonce: String
    public var outcome: PersonalizationOutcome
    public var activationId: String
    public var accountEmail: String?
    public var activationAlias: String?
    /// Present for every outcome except lockout.
    public var session: SessionMessage?
    /// The device that holds the activation now (rePersonalization, alreadyPersonalized).
    public var personalizedDeviceId: String?
    /// For the NewActivationTrigger of rePersonalization.
    public var pinSpec: PinPolicyMessage?
    public var aliasSpec: AliasPolicyMessage?
    public var canSendEmail: Bool?
    public var merge: MergeMessage?
    public var lockout: LockoutMessage?

    public init(nonce: String, outcome: PersonalizationOutcome, activationId: String) {
        self.nonce = nonce
        self.outcome = outcome
        self.activationId = activationId
    }
}

/// How a personalization continues after decrypt.
public enum PersonalizationMode: String, Codable, Sendable, CaseIterable {
    /// newPersonalization, or mergePersonalization continued with its parameters (the invite becomes its own account).
    case new
    /// rePersonalization or alreadyPersonalized: this device replaces the one that held the activation.
    case override
    /// rePersonalization with the NewActivationTrigger: a second activation on the same account, for this device.
    case newActivation
}

public struct NewActivationMessage: Codable, Equatable, Sendable {
    /// Bound to `PINBinding.grant` in an API access request, `PINBinding.personalization` in a personalization.
    public var sealedPin: SealedPINMessage
    public var alias: String?
    public var shouldSendEmail: Bool

    public init(sealedPin: SealedPINMessage, alias: String?, shouldSendEmail: Bool) {
        self.sealedPin = sealedPin
        self.alias = alias
        self.shouldSendEmail = shouldSendEmail
    }
}

/// Device-signed: the signature covers the session's challenge and proves possession of `deviceKey`.
public struct PersonalizeRequest: Codable, Equatable, Sendable {
    public var sessionId: String
    public var mode: PersonalizationMode
    /// SPKI DER, base64url.
    public var deviceKey: String
    public var keyKind: KeyKind
    public var device: DeviceInformationMessage
    public var nonce: String
    public var newActivation: NewActivationMessage?
    /// With a TPM key: its attestation, or why there is none.
    public var attestation: AttestationEvidence?

    public init(
        sessionId: String, mode: PersonalizationMode, deviceKey: String, keyKind: KeyKind,
        device: DeviceInformationMessage, nonce: String, newActivation: NewActivationMessage?, attestation: AttestationEvidence? = nil
    ) {
        self.attestation = attestation
        self.sessionId = sessionId
        self.mode = mode
        self.deviceKey = deviceKey
        self.keyKind = keyKind
        self.device = device
        self.nonce = nonce
        self.newActivation = newActivation
    }
}

/// The signed payload of a personalization answer.
public struct PersonalizationResultMessage: Codable, Equatable, Sendable {
    public var nonce: String
    public var deviceId: String
    public var activationId: String
    public var activationAlias: String
    public var accountEmail: String
    /// SPKI of the device key the manager registered, so the client can check it is its own.
    public var deviceKey: String
    public var offline: OfflinePolicyMessage?
    /// What the manager found a TPM key to be: the EK issuer it was attested with, or why it is not attested.
    public var attestedBy: String?
    public var notAttestedBecause: String?

    public init(
        nonce: String, deviceId: String, activationId: String, activationAlias: String, accountEmail: String, deviceKey: String,
        offline: OfflinePolicyMessage? = nil, attestedBy: String? = nil, notAttestedBecause: String? = nil
    ) {
        self.attestedBy = attestedBy
        self.notAttestedBecause = notAttestedBecause
        self.nonce = nonce
        self.deviceId = deviceId
        self.activationId = activationId
        self.activationAlias = activationAlias
        self.accountEmail = accountEmail
        self.deviceKey = deviceKey
        self.offline = offline
    }
}

// MARK: Device-signed requests

public struct ChallengeRequest: Codable, Equatable, Sendable {
    public var deviceId: String
    public init(deviceId: String) { self.deviceId = deviceId }
}

public struct ChallengeMessage: Codable, Equatable, Sendable {
    public var challenge: String
    public var expiresAt: Int64

    public init(challenge: String, expiresAt: Int64) {
        self.challenge = challenge
        self.expiresAt = expiresAt
    }
}

/// A request that names only the device that signs it, with the key of `deviceId` over a single-use challenge from
/// POST /v1/challenges: a revocation, the account's device list, the account page's session.
public struct DeviceSignedRequest: Codable, Equatable, Sendable {
    public var deviceId: String
    public var challenge: String
    public var nonce: String

    public init(deviceId: String, challenge: String, nonce: String) {
        self.deviceId = deviceId
        self.challenge = challenge
        self.nonce = nonce
    }
}

public typealias RevokeRequest = DeviceSignedRequest

public struct RevocationResultMessage: Codable, Equatable, Sendable {
    public var nonce: String
    public var deviceId: String

    public init(nonce: String, deviceId: String) {
        self.nonce = nonce
        self.deviceId = deviceId
    }
}

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

    public init(status: String, version: String, managerKeyFingerprint: String, managerKey: String, pinSealingKey: String?) {
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

/// The canonical encoding a device signs (docs/design.md, invariant 3):
/// `xign-request-v1 LF METHOD LF path LF base64url(SHA-256(body)) LF challenge`.
/// The path is the API path ("/v1/…"), independent of any prefix the manager is mounted under.
public enum SignedRequest {
    public static let signatureHeader = "X-Xign-Signature"

    public static func canonicalMessage(method: String, path: String, body: Data, challenge: String) -> Data {
        let lines = ["xign-request-v1", method.uppercased(), path, Base64URL.encode(SHA256.hash(body)), challenge]
        return Data(lines.joined(separator: "\n").utf8)
    }
}

extension RegisterRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.list("arbitraryUserAttributes", arbitraryUserAttributes ?? [:], maximum: WireLimit.arbitraryAttributes) {
            (entry) throws(LimitViolation) in
            try Limit.line("a key of arbitraryUserAttributes", entry.key, maximum: WireLimit.attributeName, allowsEmpty: false)
            try Limit.line("arbitraryUserAttributes[\(entry.key)]", entry.value, maximum: WireLimit.arbitraryValue)
        }
        try Limit.require(
            serviceMappingId.map { IdentifierValidator.isValid($0) } ?? true, "serviceMappingId",
            "must be 1 to 64 printable ASCII characters without spaces")
    }
}

extension DecryptRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("activationId", activationId, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.text("activationSecret", activationSecret, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.text("nonce", nonce, maximum: WireLimit.nonce)
        try Limit.list("knownDeviceIds", knownDeviceIds, maximum: WireLimit.idList) { (id) throws(LimitViolation) in
            try Limit.text("an entry of knownDeviceIds", id, maximum: WireLimit.identifier, allowsEmpty: true)
        }
    }
}

extension DeviceInformationMessage: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.line("device.name", name, maximum: WireLimit.deviceName)
        try Limit.line("device.platform", platform, maximum: WireLimit.deviceName)
    }
}

extension PersonalizeRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("sessionId", sessionId, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.text("nonce", nonce, maximum: WireLimit.nonce)
        try device.checkLimits()
    }
}

extension ChallengeRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("deviceId", deviceId, maximum: WireLimit.identifier, allowsEmpty: true)
    }
}

extension DeviceSignedRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("deviceId", deviceId, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.text("challenge", challenge, maximum: WireLimit.nonce)
        try Limit.text("nonce", nonce, maximum: WireLimit.nonce)
    }
}

extension ChallengeMessage: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("challenge", challenge, maximum: WireLimit.nonce)
    }
}

extension SessionMessage: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("session.id", id, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.text("session.challenge", challenge, maximum: WireLimit.nonce, allowsEmpty: true)
    }
}

extension DecryptResult: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try session?.checkLimits()
    }
}

extension RegistrationParametersMessage: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.require(
            pinSpec.minLength >= 1 && pinSpec.minLength <= pinSpec.maxLength && pinSpec.maxLength <= WireLimit.pin, "pinSpec",
            "has PIN lengths that do not fit (1 ≤ minLength ≤ maxLength ≤ \(WireLimit.pin))")
        try Limit.require(!categories.isEmpty, "categories", "is empty")
        try Limit.list("categories", categories, maximum: WireLimit.categories)
    }
}

extension PersonalizationResultMessage: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.plainIdentifier("deviceId", deviceId, extra: ["-", "_"])
    }
}
