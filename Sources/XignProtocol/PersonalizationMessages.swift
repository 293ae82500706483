import FoundationEssentials
import XignCrypto

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

    public init(
        activationId: String, activationSecret: String, sealedPin: SealedPINMessage, nonce: String,
        knownDeviceIds: [String]
    ) {
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
        device: DeviceInformationMessage, nonce: String, newActivation: NewActivationMessage?,
        attestation: AttestationEvidence? = nil
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
        nonce: String, deviceId: String, activationId: String, activationAlias: String, accountEmail: String,
        deviceKey: String,
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

extension DeviceInformationMessage: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.line("device.name", name, maximum: WireLimit.deviceName)
        try Limit.line("device.platform", platform, maximum: WireLimit.deviceName)
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

extension PersonalizeRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("sessionId", sessionId, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.text("nonce", nonce, maximum: WireLimit.nonce)
        try device.checkLimits()
    }
}

extension PersonalizationResultMessage: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.plainIdentifier("deviceId", deviceId, extra: ["-", "_"])
    }
}
