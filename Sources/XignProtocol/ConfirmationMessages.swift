import FoundationEssentials
import XignCrypto

// Login confirmation: a host asks the manager to have a user confirm a login on an enrolled device, which approves
// with the SDKs' authentication (device + PIN, ending in userLogin). docs/protocol.md, "Login confirmation".

extension APIPath {
    /// A single-use challenge for a host-signed request.
    public static let hostChallenges = "/v1/hosts/challenges"
    /// A host starts a confirmation (host-signed).
    public static let confirmations = "/v1/confirmations"
    /// A host waits for the decision (long poll, with the wait token from the start).
    public static let confirmationWait = "/v1/confirmations/wait"
    /// A host withdraws its confirmation (the client went away); with the wait token.
    public static let confirmationWithdrawal = "/v1/confirmations/withdraw"
    /// An enrolled device lists the confirmations waiting for its account (device-signed, long poll).
    public static let confirmationsPending = "/v1/confirmations/pending"
    /// An enrolled device refuses a confirmation (device-signed).
    public static let confirmationDenial = "/v1/confirmations/deny"
}

extension SignedAnswerType {
    public static let confirmationStart = "xign-confirmation+jwt"
    public static let confirmationResult = "xign-confirmation-result+jwt"
    public static let confirmationList = "xign-confirmation-list+jwt"
}

public struct HostChallengeRequest: Codable, Equatable, Sendable {
    public var hostId: String
    public init(hostId: String) { self.hostId = hostId }
}

/// Host-signed over `challenge` (from /v1/hosts/challenges).
public struct ConfirmationRequest: Codable, Equatable, Sendable {
    public var hostId: String
    public var challenge: String
    /// The local login name being logged in to; the manager maps it to the account.
    public var loginName: String
    /// The PAM service (sshd, sudo, …).
    public var service: String
    public var remoteHost: String?
    public var tty: String?
    /// For sudo: the command, when the host knows it without reading the caller's environment.
    public var command: String?
    public var nonce: String
    /// The uid of this host's user with `loginName` (nil: it has none). The manager confirms a login only to its own
    /// account's uid, unless the administrator let the account be the hosts' local user of its name (H5).
    public var localUid: Int64?

    public init(
        hostId: String, challenge: String, loginName: String, service: String, remoteHost: String?, tty: String?,
        command: String?, nonce: String, localUid: Int64? = nil
    ) {
        self.localUid = localUid
        self.hostId = hostId
        self.challenge = challenge
        self.loginName = loginName
        self.service = service
        self.remoteHost = remoteHost
        self.tty = tty
        self.command = command
        self.nonce = nonce
    }
}

/// The signed start of a confirmation, for the host to show and then wait with.
public struct ConfirmationStartMessage: Codable, Equatable, Sendable {
    public var nonce: String
    public var confirmationId: String
    /// What the user types on the approving device (number matching).
    public var code: String
    /// `XIGN://C/<confirmationId>`: upper case, so a QR code takes it in alphanumeric mode.
    public var payload: String
    /// The same as an https App-Link, for devices that open links.
    public var appLink: String
    /// Presented with /v1/confirmations/wait; only the host that started the confirmation has it.
    public var waitToken: String
    public var issuedAt: Int64
    public var expiresAt: Int64

    public init(
        nonce: String, confirmationId: String, code: String, payload: String, appLink: String, waitToken: String,
        issuedAt: Int64, expiresAt: Int64
    ) {
        self.nonce = nonce
        self.confirmationId = confirmationId
        self.code = code
        self.payload = payload
        self.appLink = appLink
        self.waitToken = waitToken
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
    }
}

public struct ConfirmationWaitRequest: Codable, Equatable, Sendable {
    public var confirmationId: String
    public var waitToken: String
    /// How long the manager may hold the answer while nothing is decided (at most 25 s).
    public var waitMilliseconds: Int

    public init(confirmationId: String, waitToken: String, waitMilliseconds: Int) {
        self.confirmationId = confirmationId
        self.waitToken = waitToken
        self.waitMilliseconds = waitMilliseconds
    }
}

public enum ConfirmationState: String, Codable, Sendable, CaseIterable {
    case pending, approved, denied, expired
    /// The host gave up (its client went away) before a decision.
    case withdrawn
}

/// A host's withdrawal of the confirmation it started.
public struct ConfirmationWithdrawalRequest: Codable, Equatable, Sendable {
    public var confirmationId: String
    public var waitToken: String

    public init(confirmationId: String, waitToken: String) {
        self.confirmationId = confirmationId
        self.waitToken = waitToken
    }
}

/// The signed decision, bound to the host, the login name, the service and the host's start nonce.
public struct ConfirmationResultMessage: Codable, Equatable, Sendable {
    public var nonce: String
    public var confirmationId: String
    public var hostId: String
    public var loginName: String
    public var service: String
    public var state: ConfirmationState
    /// approved: the device that approved it.
    public var approvedBy: String?
    /// denied: whether the user denied it or too many wrong codes did (absent from managers before it).
    public var endedBecause: ConfirmationEnding?

    public init(
        nonce: String, confirmationId: String, hostId: String, loginName: String, service: String,
        state: ConfirmationState, approvedBy: String?,
        endedBecause: ConfirmationEnding? = nil
    ) {
        self.nonce = nonce
        self.confirmationId = confirmationId
        self.hostId = hostId
        self.loginName = loginName
        self.service = service
        self.state = state
        self.approvedBy = approvedBy
        self.endedBecause = endedBecause
    }
}

/// Why a confirmation was denied, so that nobody is told a person refused what a count of wrong codes ended.
public enum ConfirmationEnding: String, Codable, Sendable {
    /// The user refused it on an enrolled device.
    case denied
    /// Codes typed at the approving device were wrong as many times as allowed.
    case wrongCodes
}

/// Device-signed over a challenge from /v1/challenges.
public struct PendingConfirmationsRequest: Codable, Equatable, Sendable {
    public var deviceId: String
    public var challenge: String
    public var nonce: String
    /// How long the manager may hold the answer while none is pending (0 to 25 000 ms).
    public var waitMilliseconds: Int

    public init(deviceId: String, challenge: String, nonce: String, waitMilliseconds: Int) {
        self.deviceId = deviceId
        self.challenge = challenge
        self.nonce = nonce
        self.waitMilliseconds = waitMilliseconds
    }
}

/// What an approving device shows; the code is deliberately not in it.
public struct PendingConfirmationMessage: Codable, Equatable, Sendable {
    public var confirmationId: String
    public var host: String
    public var service: String
    public var loginName: String
    public var remoteHost: String?
    public var tty: String?
    public var command: String?
    public var createdAt: Int64
    public var expiresAt: Int64

    public init(
        confirmationId: String, host: String, service: String, loginName: String, remoteHost: String?, tty: String?,
        command: String?,
        createdAt: Int64, expiresAt: Int64
    ) {
        self.confirmationId = confirmationId
        self.host = host
        self.service = service
        self.loginName = loginName
        self.remoteHost = remoteHost
        self.tty = tty
        self.command = command
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

public struct ConfirmationListMessage: Codable, Equatable, Sendable {
    public var nonce: String
    public var confirmations: [PendingConfirmationMessage]

    public init(nonce: String, confirmations: [PendingConfirmationMessage]) {
        self.nonce = nonce
        self.confirmations = confirmations
    }
}

/// Device-signed over a challenge from /v1/challenges.
public struct ConfirmationDenialRequest: Codable, Equatable, Sendable {
    public var deviceId: String
    public var challenge: String
    public var confirmationId: String

    public init(deviceId: String, challenge: String, confirmationId: String) {
        self.deviceId = deviceId
        self.challenge = challenge
        self.confirmationId = confirmationId
    }
}

/// What a host's QR code holds: the App-Link `<MANAGER URL>/C#<id>` with scheme and host in upper case, so that a
/// phone's camera opens the manager's approval page and the code stays mostly in QR alphanumeric mode. The id is 26
/// characters of base32 (130 bits, upper case), in the fragment, which no request carries. `XIGN://C/<id>` is read too.
public enum ConfirmationPayload {
    public static let prefix = "XIGN://C/"
    /// The path of the approval page, as the QR code writes it (the manager answers `/c` too).
    public static let linkPath = "/C"
    /// The account page (the web app's WebPath.account), where a browser signed in with its passkey lists the waiting logins.
    public static let accountPath = "/account"

    /// The QR code's text for confirmation `id` at `manager`.
    public static func link(to id: String, at manager: ManagerURL) -> String {
        manager.upperCased + linkPath + "#" + id
    }

    /// The confirmation id in a payload or App-Link (`…/c#<id>`, any case), or nil.
    public static func confirmationId(in text: String) -> String? {
        let trimmed = text.trimmingWhitespace
        let lower = trimmed.lowercased()
        let id: Substring
        if trimmed.uppercased().hasPrefix(prefix) {
            id = trimmed.dropFirst(prefix.count)
        } else if let hash = trimmed.lastIndex(of: "#"), lower.hasPrefix("https://") || lower.hasPrefix("http://"),
            trimmed[..<hash].lowercased().hasSuffix("/c")
        {
            id = trimmed[trimmed.index(after: hash)...]
        } else {
            return nil
        }
        let upper = id.uppercased()
        guard upper.utf8.count == 26, upper.utf8.allSatisfy({ Base32.alphabet.utf8.contains($0) }) else { return nil }
        return upper
    }

    /// The account page at the manager of the App-Link `appLink` (`<manager>/c#<id>`), or nil for other text.
    public static func accountPage(of appLink: String) -> String? {
        let link = appLink.trimmingWhitespace
        guard !link.uppercased().hasPrefix(prefix), confirmationId(in: link) != nil, let hash = link.lastIndex(of: "#")
        else { return nil }
        return String(link[..<hash].dropLast(linkPath.count)) + accountPath
    }
}

/// The answer to a denial.
public struct ConfirmationStateMessage: Codable, Equatable, Sendable {
    public var confirmationId: String
    public var state: ConfirmationState

    public init(confirmationId: String, state: ConfirmationState) {
        self.confirmationId = confirmationId
        self.state = state
    }
}

extension String {
    var trimmingWhitespace: String {
        String(drop(while: { $0.isWhitespace }).reversed().drop(while: { $0.isWhitespace }).reversed())
    }
}

extension HostChallengeRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("hostId", hostId, maximum: WireLimit.identifier, allowsEmpty: true)
    }
}

extension ConfirmationRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("hostId", hostId, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.text("challenge", challenge, maximum: WireLimit.nonce, allowsEmpty: true)
        try Limit.text("nonce", nonce, maximum: WireLimit.nonce)
        try Limit.require(LoginNameValidator.validate(loginName) == .valid, "loginName", "is not a login name")
        try Limit.require(
            IdentifierValidator.isValid(service), "service", "must be 1 to 64 printable ASCII characters without spaces"
        )
        for (field, value) in [("remoteHost", remoteHost), ("tty", tty), ("command", command)] {
            try Limit.require(
                value.map { TextAttributeValidator.validate($0) == .valid } ?? true, field,
                "is empty, longer than \(TextAttributeValidator.maximumLength) characters or holds control characters")
        }
    }
}

extension ConfirmationWaitRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("confirmationId", confirmationId, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.text("waitToken", waitToken, maximum: WireLimit.identifier, allowsEmpty: true)
    }
}

extension ConfirmationWithdrawalRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("confirmationId", confirmationId, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.text("waitToken", waitToken, maximum: WireLimit.identifier, allowsEmpty: true)
    }
}

extension PendingConfirmationsRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("deviceId", deviceId, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.text("challenge", challenge, maximum: WireLimit.nonce, allowsEmpty: true)
        try Limit.text("nonce", nonce, maximum: WireLimit.nonce)
    }
}

extension ConfirmationDenialRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("deviceId", deviceId, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.text("challenge", challenge, maximum: WireLimit.nonce, allowsEmpty: true)
        try Limit.text("confirmationId", confirmationId, maximum: WireLimit.identifier, allowsEmpty: true)
    }
}

extension ConfirmationStartMessage: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.require(
            code.utf8.count == WireLimit.confirmationDigits
                && code.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) },
            "code", "is not \(WireLimit.confirmationDigits) digits")
        try Limit.text("waitToken", waitToken, maximum: WireLimit.identifier)
        try Limit.text("appLink", appLink, maximum: WireLimit.appLink, allowsEmpty: true)
    }
}

extension ConfirmationListMessage: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.list("confirmations", confirmations, maximum: WireLimit.pendingConfirmations)
    }
}
