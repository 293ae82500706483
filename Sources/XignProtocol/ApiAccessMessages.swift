import FoundationEssentials
import XignCrypto

// The SDKs' api access processes: an authentication with the device and the PIN for the process's purpose
// ends in a single-use grant, and the device then finishes the process at /v1/api-access with it.

extension APIPath {
    public static let apiAccess = "/v1/api-access"
    /// The devices of the caller's account (device information); device-signed over a /v1/challenges challenge.
    public static let accountDevices = "/v1/devices/list"
}

extension SignedAnswerType {
    public static let apiAccess = "xign-api-access+jwt"
    public static let accountDevices = "xign-devices+jwt"
}

/// The processes an authentication can open instead of a login.
public enum ApiAccessProcess: String, Codable, Sendable, CaseIterable {
    case changePin
    case requestNewActivation
    case delete
    case addFactor
    /// Removes another device of the account (a lost phone, a stolen laptop); its activation ends.
    case revokeDevice
    /// Opens the administrator's console (`/v1/console/sessions`), for an account that holds a console role.
    case console
}

/// In an authentication result: the grant that finishes the process.
public struct ApiAccessGrantMessage: Codable, Equatable, Sendable {
    public var process: ApiAccessProcess
    /// Single use; the device signs the finishing request over it.
    public var grant: String
    public var issuedAt: Int64
    public var expiresAt: Int64
    /// changePin and requestNewActivation: the policy the new PIN must meet.
    public var pinSpec: PinPolicyMessage?
    /// requestNewActivation: the policy of the new activation's alias.
    public var aliasSpec: AliasPolicyMessage?
    /// requestNewActivation: whether the manager can mail the activation data.
    public var canSendEmail: Bool?
    /// changePin and requestNewActivation: the key the new PIN is sealed to (SPKI DER, base64url).
    public var pinSealingKey: String?

    public init(process: ApiAccessProcess, grant: String, issuedAt: Int64, expiresAt: Int64) {
        self.process = process
        self.grant = grant
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
    }
}

/// Device-signed over the grant. Exactly the field of the grant's process is set.
public struct ApiAccessRequest: Codable, Equatable, Sendable {
    public var grant: String
    public var nonce: String
    /// changePin, bound to `PINBinding.grant`.
    public var sealedNewPin: SealedPINMessage?
    /// requestNewActivation.
    public var newActivation: NewActivationMessage?
    /// addFactor.
    public var factor: AuthenticatorType?
    /// addFactor biometric: the digest of the user's enrolled fingers the factor is bound to; absent where the device
    /// does not bind it.
    public var biometricEnrolment: String?
    /// revokeDevice: a device of the same account.
    public var revokedDeviceId: String?

    public init(
        grant: String, nonce: String, sealedNewPin: SealedPINMessage? = nil, newActivation: NewActivationMessage? = nil,
        factor: AuthenticatorType? = nil, biometricEnrolment: String? = nil, revokedDeviceId: String? = nil
    ) {
        self.biometricEnrolment = biometricEnrolment
        self.grant = grant
        self.nonce = nonce
        self.sealedNewPin = sealedNewPin
        self.newActivation = newActivation
        self.factor = factor
        self.revokedDeviceId = revokedDeviceId
    }
}

/// The new activation a requestNewActivation made: its data goes to the other machine.
public struct NewActivationDataMessage: Codable, Equatable, Sendable {
    public var activationId: String
    public var alias: String
    /// The activation data as a link (`xign-setup personalize` reads it; a QR code carries it).
    public var activationData: String
    public var mailQueued: Bool

    public init(activationId: String, alias: String, activationData: String, mailQueued: Bool) {
        self.activationId = activationId
        self.alias = alias
        self.activationData = activationData
        self.mailQueued = mailQueued
    }
}

/// The signed answer of /v1/api-access.
public struct ApiAccessResultMessage: Codable, Equatable, Sendable {
    public var nonce: String
    public var process: ApiAccessProcess
    public var deviceId: String
    /// changePin: how many activations of the account the new PIN now unlocks.
    public var activationsWithNewPin: Int?
    public var newActivation: NewActivationDataMessage?
    /// addFactor: every factor the device can now sign with.
    public var factors: [AuthenticatorType]?
    /// delete: how many devices of the account were revoked with it.
    public var revokedDevices: Int?
    /// changePin: the device's offline policy with the new PIN's generation.
    public var offline: OfflinePolicyMessage?

    public init(nonce: String, process: ApiAccessProcess, deviceId: String) {
        self.nonce = nonce
        self.process = process
        self.deviceId = deviceId
    }
}

public typealias AccountDevicesRequest = DeviceSignedRequest

/// One device of an account (the SDKs' device information).
public struct DeviceSummaryMessage: Codable, Equatable, Sendable {
    public var deviceId: String
    public var activationAlias: String
    public var name: String
    public var platform: String
    public var keyKind: KeyKind
    public var factors: [AuthenticatorType]
    public var enrolledAt: Int64
    /// nil until the device first authenticates.
    public var lastUsedAt: Int64?
    /// The issuer of the EK certificate the device's TPM proved its key with; nil when the key is not attested.
    public var attestedBy: String?

    public init(
        deviceId: String, activationAlias: String, name: String, platform: String, keyKind: KeyKind,
        factors: [AuthenticatorType],
        enrolledAt: Int64, lastUsedAt: Int64?, attestedBy: String? = nil
    ) {
        self.attestedBy = attestedBy
        self.deviceId = deviceId
        self.activationAlias = activationAlias
        self.name = name
        self.platform = platform
        self.keyKind = keyKind
        self.factors = factors
        self.enrolledAt = enrolledAt
        self.lastUsedAt = lastUsedAt
    }
}

public struct AccountDevicesMessage: Codable, Equatable, Sendable {
    public var nonce: String
    public var devices: [DeviceSummaryMessage]

    public init(nonce: String, devices: [DeviceSummaryMessage]) {
        self.nonce = nonce
        self.devices = devices
    }
}

extension ApiAccessRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("grant", grant, maximum: WireLimit.nonce)
        try Limit.text("nonce", nonce, maximum: WireLimit.nonce)
        try Limit.text("newActivation.alias", newActivation?.alias, maximum: WireLimit.alias, allowsEmpty: true)
        try Limit.text("revokedDeviceId", revokedDeviceId, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.digest("biometricEnrolment", biometricEnrolment)
    }
}

extension AccountDevicesMessage: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.list("devices", devices, maximum: WireLimit.accountDevices)
    }
}
