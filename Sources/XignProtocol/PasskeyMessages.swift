import FoundationEssentials

// What the manager's web app sends for a browser, whose device key is a passkey (docs/protocol.md, "Browsers").

extension APIPath {
    /// A browser's personalization: the passkey it made over the session's challenge.
    public static let passkeyPersonalizations = "/v1/personalizations/passkey"
    /// What a login request asks, for the page that approves it: neither the code nor the account.
    public static let confirmationView = "/v1/confirmations/view"
    /// An approval in one device-signed request (code, PIN and proof), so a browser asks for the passkey once.
    public static let confirmationApproval = "/v1/confirmations/approve"
    /// A short read-only session for the account page, opened with a device-signed request; it lives in a cookie.
    public static let webSessions = "/v1/web/sessions"
    public static let webSessionEnd = "/v1/web/sessions/end"
    /// The session's account: the logins that wait (long-polled) and the devices.
    public static let webPending = "/v1/web/pending"
    public static let webDevices = "/v1/web/devices"
}

extension SignedAnswerType {
    public static let confirmationApproval = "xign-approval+jwt"
}

/// Continues a personalization session with a passkey: the attestation object and clientDataJSON of
/// `navigator.credentials.create`, whose challenge is the session's challenge.
public struct PasskeyPersonalizeRequest: Codable, Equatable, Sendable {
    public var sessionId: String
    /// `new` or `override`; a browser does not make a second activation.
    public var mode: PersonalizationMode
    public var device: DeviceInformationMessage
    public var nonce: String
    /// base64url.
    public var attestationObject: String
    /// base64url.
    public var clientDataJSON: String

    public init(
        sessionId: String, mode: PersonalizationMode, device: DeviceInformationMessage, nonce: String,
        attestationObject: String,
        clientDataJSON: String
    ) {
        self.sessionId = sessionId
        self.mode = mode
        self.device = device
        self.nonce = nonce
        self.attestationObject = attestationObject
        self.clientDataJSON = clientDataJSON
    }
}

public struct ConfirmationViewRequest: Codable, Equatable, Sendable {
    public var confirmationId: String

    public init(confirmationId: String) { self.confirmationId = confirmationId }
}

/// A login request as the approval page shows it. Whoever holds the id sees the server's screen already; the
/// code and the account are not in it.
public struct ConfirmationViewMessage: Codable, Equatable, Sendable {
    public var confirmationId: String
    public var host: String
    public var service: String
    public var loginName: String
    public var remoteHost: String?
    public var tty: String?
    public var createdAt: Int64
    public var expiresAt: Int64
    public var state: ConfirmationState
    /// denied: by the user, or by wrong codes.
    public var endedBecause: ConfirmationEnding?

    public init(
        confirmationId: String, host: String, service: String, loginName: String, remoteHost: String?, tty: String?,
        createdAt: Int64,
        expiresAt: Int64, state: ConfirmationState, endedBecause: ConfirmationEnding? = nil
    ) {
        self.confirmationId = confirmationId
        self.host = host
        self.service = service
        self.loginName = loginName
        self.remoteHost = remoteHost
        self.tty = tty
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.state = state
        self.endedBecause = endedBecause
    }
}

/// Approves a confirmation in one request, signed by the device over a `/v1/challenges` challenge.
public struct ConfirmationApprovalRequest: Codable, Equatable, Sendable {
    public var deviceId: String
    public var challenge: String
    public var confirmationId: String
    /// The code the host shows.
    public var confirmationCode: String
    /// Bound with `PINBinding.approval`.
    public var sealedPin: SealedPINMessage
    public var nonce: String

    public init(
        deviceId: String, challenge: String, confirmationId: String, confirmationCode: String,
        sealedPin: SealedPINMessage, nonce: String
    ) {
        self.deviceId = deviceId
        self.challenge = challenge
        self.confirmationId = confirmationId
        self.confirmationCode = confirmationCode
        self.sealedPin = sealedPin
        self.nonce = nonce
    }
}

/// The signed answer of an approval: approved, or the lock a wrong PIN set.
public struct ConfirmationApprovalMessage: Codable, Equatable, Sendable {
    public enum Outcome: String, Codable, Sendable { case approved, lockout }

    public var nonce: String
    public var confirmationId: String
    public var outcome: Outcome
    public var host: String?
    public var lockout: LockoutMessage?

    public init(
        nonce: String, confirmationId: String, outcome: Outcome, host: String? = nil, lockout: LockoutMessage? = nil
    ) {
        self.nonce = nonce
        self.confirmationId = confirmationId
        self.outcome = outcome
        self.host = host
        self.lockout = lockout
    }
}

/// Opens a web session.
public typealias WebSessionRequest = DeviceSignedRequest

public struct WebSessionMessage: Codable, Equatable, Sendable {
    public var expiresAt: Int64

    public init(expiresAt: Int64) { self.expiresAt = expiresAt }
}

/// Waits up to `waitMilliseconds` (at most 25 s) for the waiting logins to differ from `seen` (their ids).
public struct WebPendingRequest: Codable, Equatable, Sendable {
    public var waitMilliseconds: Int
    public var seen: [String]

    public init(waitMilliseconds: Int, seen: [String]) {
        self.waitMilliseconds = waitMilliseconds
        self.seen = seen
    }
}

public struct WebPendingMessage: Codable, Equatable, Sendable {
    public var confirmations: [PendingConfirmationMessage]

    public init(confirmations: [PendingConfirmationMessage]) { self.confirmations = confirmations }
}

/// The session's account's devices, and which of them is this browser.
public struct WebDevicesMessage: Codable, Equatable, Sendable {
    public var deviceId: String
    public var devices: [DeviceSummaryMessage]

    public init(deviceId: String, devices: [DeviceSummaryMessage]) {
        self.deviceId = deviceId
        self.devices = devices
    }
}

extension PasskeyPersonalizeRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("sessionId", sessionId, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.text("nonce", nonce, maximum: WireLimit.nonce)
        try device.checkLimits()
        try Limit.text("attestationObject", attestationObject, maximum: WireLimit.webAuthnField, allowsEmpty: true)
        try Limit.text("clientDataJSON", clientDataJSON, maximum: WireLimit.webAuthnField, allowsEmpty: true)
    }
}

extension ConfirmationViewRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("confirmationId", confirmationId, maximum: WireLimit.identifier)
    }
}

extension ConfirmationApprovalRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("deviceId", deviceId, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.text("challenge", challenge, maximum: WireLimit.nonce)
        try Limit.text("confirmationId", confirmationId, maximum: WireLimit.identifier)
        try Limit.text("confirmationCode", confirmationCode, maximum: WireLimit.confirmationCode, allowsEmpty: true)
        try Limit.text("nonce", nonce, maximum: WireLimit.nonce)
    }
}

extension WebPendingRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.list("seen", seen, maximum: WireLimit.idList) { (id) throws(LimitViolation) in
            try Limit.text("an entry of seen", id, maximum: WireLimit.identifier, allowsEmpty: true)
        }
    }
}
