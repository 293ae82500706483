import FoundationEssentials

// Authentication (InApp, as pam_xign uses it) in four round trips (a challenge first):
// start → finish (device-signed, PIN checked, authorization code batched in) → token.

extension APIPath {
    public static let authentications = "/v1/authentications"
    public static let authenticationFinish = "/v1/authentications/finish"
    public static let token = "/v1/token"
}

extension SignedAnswerType {
    public static let authenticationStart = "xign-authentication+jwt"
    public static let authenticationResult = "xign-authentication-result+jwt"
    public static let loginToken = "xign-token+jwt"
}

/// The factors a request can be signed with (the SDKs' AuthenticatorType).
public enum AuthenticatorType: String, Codable, Sendable, CaseIterable {
    case device, pin, biometric, otp, yubikey
}

public struct RoleMessage: Codable, Equatable, Sendable {
    public var name: String
    /// Alternatives (outer) of factors that must all be given (inner).
    public var requestedAuthenticators: [[AuthenticatorType]]

    public init(name: String, requestedAuthenticators: [[AuthenticatorType]]) {
        self.name = name
        self.requestedAuthenticators = requestedAuthenticators
    }
}

public struct PersonalInformationAliasMessage: Codable, Equatable, Sendable {
    public var alias: String
    public var isPrimary: Bool

    public init(alias: String, isPrimary: Bool) {
        self.alias = alias
        self.isPrimary = isPrimary
    }
}

/// An attribute the service asks for. Values never travel to the device, only aliases for them.
public struct AuthenticationAttributeMessage: Codable, Equatable, Sendable {
    public var name: String
    public var isRequired: Bool
    public var isDataMissing: Bool
    public var aliases: [PersonalInformationAliasMessage]

    public init(name: String, isRequired: Bool, isDataMissing: Bool, aliases: [PersonalInformationAliasMessage]) {
        self.name = name
        self.isRequired = isRequired
        self.isDataMissing = isDataMissing
        self.aliases = aliases
    }
}

/// The SDKs' AuthenticationInformationErrorCode.
public enum AuthenticationAttributeErrorCode: String, Codable, Sendable, CaseIterable {
    case none, invalid, notAvailable, dataMissing, noAliasSelected
}

/// What an authentication is for. The device names it at start, the manager stores it with the pending
/// authentication, and each side decides by it alone what the finish may return.
public enum AuthenticationPurpose: Codable, Sendable, Hashable {
    /// A login to a service the manager configures (pam_xign); it ends in a service login.
    case login(service: String)
    /// Approving a login a host asked to confirm; it ends in a user login for that host.
    case confirmation(id: String)
    /// Merging an organization invite (its personalization session) into this device's account.
    case merge(sessionId: String)
    /// An api access process; it ends in a grant that finishes it.
    case apiAccess(process: ApiAccessProcess)
}

/// Device-signed over a /v1/challenges challenge, like every request a device makes.
public struct AuthenticationStartRequest: Codable, Equatable, Sendable {
    public var deviceId: String
    public var challenge: String
    public var purpose: AuthenticationPurpose
    /// With purpose `confirmation`: the code the host shows (number matching).
    public var confirmationCode: String?
    /// The host the login happens on; the token will be bound to it.
    public var host: String
    /// The local account being logged in to; the token will be bound to it.
    public var localUser: String
    public var nonce: String
    /// What happened offline since the manager's last acknowledgement.
    public var offlineReport: OfflineReportMessage?

    public init(
        deviceId: String, challenge: String, purpose: AuthenticationPurpose, confirmationCode: String? = nil,
        host: String, localUser: String,
        nonce: String, offlineReport: OfflineReportMessage? = nil
    ) {
        self.deviceId = deviceId
        self.challenge = challenge
        self.purpose = purpose
        self.confirmationCode = confirmationCode
        self.host = host
        self.localUser = localUser
        self.nonce = nonce
        self.offlineReport = offlineReport
    }
}

/// The signed payload of a start answer.
public struct AuthenticationStartMessage: Codable, Equatable, Sendable {
    public var nonce: String
    public var authenticationId: String
    public var challenge: String
    public var expiresAt: Int64
    /// The purpose the device asked for, as the manager stored it.
    public var purpose: AuthenticationPurpose
    public var relyingPartyName: String
    public var roles: [RoleMessage]
    public var attributes: [AuthenticationAttributeMessage]
    /// The device's offline policy as it stands (absent from managers before offline login).
    public var offline: OfflinePolicyMessage?
    /// The key the finish's PIN is sealed to (SPKI DER, base64url), vouched for by this answer's signature.
    public var pinSealingKey: String?

    public init(
        nonce: String, authenticationId: String, challenge: String, expiresAt: Int64, purpose: AuthenticationPurpose,
        relyingPartyName: String,
        roles: [RoleMessage], attributes: [AuthenticationAttributeMessage], offline: OfflinePolicyMessage? = nil,
        pinSealingKey: String? = nil
    ) {
        self.nonce = nonce
        self.authenticationId = authenticationId
        self.challenge = challenge
        self.expiresAt = expiresAt
        self.purpose = purpose
        self.relyingPartyName = relyingPartyName
        self.roles = roles
        self.attributes = attributes
        self.offline = offline
        self.pinSealingKey = pinSealingKey
    }
}

/// Device-signed over the start answer's challenge.
public struct AuthenticationFinishRequest: Codable, Equatable, Sendable {
    public var authenticationId: String
    public var role: String
    /// The factors given, one alternative of the role's requestedAuthenticators.
    public var factors: [AuthenticatorType]
    /// Bound to `PINBinding.authentication`.
    public var sealedPin: SealedPINMessage?
    /// Values for attributes whose data was missing.
    public var attributeValues: [String: String]
    /// The chosen alias for attributes with several values.
    public var attributeSelections: [String: String]
    public var nonce: String
    /// A login's token comes with the answer, signed for this nonce, instead of for a code at /v1/token.
    public var tokenNonce: String?
    /// With the biometric factor: the digest of the user's enrolled fingers now, which must be the one the factor was
    /// added with.
    public var biometricEnrolment: String?

    public init(
        authenticationId: String, role: String, factors: [AuthenticatorType], sealedPin: SealedPINMessage?,
        attributeValues: [String: String], attributeSelections: [String: String], nonce: String,
        tokenNonce: String? = nil,
        biometricEnrolment: String? = nil
    ) {
        self.biometricEnrolment = biometricEnrolment
        self.authenticationId = authenticationId
        self.role = role
        self.factors = factors
        self.sealedPin = sealedPin
        self.attributeValues = attributeValues
        self.attributeSelections = attributeSelections
        self.nonce = nonce
        self.tokenNonce = tokenNonce
    }
}

/// What an authentication ended in, each case with only what it carries.
public enum AuthenticationOutcome: Equatable, Sendable {
    /// A login to a service: its code, or with a `tokenNonce` in the finish the login token itself (a compact JWS,
    /// as /v1/token answers it).
    case serviceLogin(ServiceLoginMessage, loginToken: String?)
    /// A wrong PIN. For a lock that runs out, the challenge to sign the next attempt with once it has.
    case lockout(LockoutMessage, nextChallenge: String?)
    /// The merge process: the invited address now belongs to the device's account.
    case mergeComplete(mergedEmail: String)
    /// A login confirmation was approved: the host that asked may let the user in.
    case userLogin(UserLoginMessage)
    /// An api access process (change PIN, new activation, delete, add factor) may be finished with the grant.
    case apiAccess(ApiAccessGrantMessage)

    /// The case's name on the wire.
    public var name: String {
        switch self {
        case .serviceLogin: "serviceLogin"
        case .lockout: "lockout"
        case .mergeComplete: "mergeComplete"
        case .userLogin: "userLogin"
        case .apiAccess: "apiAccess"
        }
    }
}

/// What a device that approved a login confirmation learns.
public struct UserLoginMessage: Codable, Equatable, Sendable {
    /// The host's name.
    public var relyingPartyName: String
    public var role: String
    public var loginName: String

    public init(relyingPartyName: String, role: String, loginName: String) {
        self.relyingPartyName = relyingPartyName
        self.role = role
        self.loginName = loginName
    }
}

public struct ServiceLoginMessage: Codable, Equatable, Sendable {
    /// Single use, short-lived; exchanged at /v1/token. None when the login token came with the answer.
    public var authorizationCode: String?
    /// The manager's clock when the code was made; with `expiresAt` it gives the code's lifetime.
    public var issuedAt: Int64
    public var expiresAt: Int64
    public var service: String
    public var relyingPartyName: String
    public var role: String

    public init(
        authorizationCode: String?, issuedAt: Int64, expiresAt: Int64, service: String, relyingPartyName: String,
        role: String
    ) {
        self.authorizationCode = authorizationCode
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
        self.service = service
        self.relyingPartyName = relyingPartyName
        self.role = role
    }
}

/// The signed payload of a finish answer. On the wire the outcome is a name in `outcome` beside the fields its case
/// carries (`serviceLogin` and `loginToken`, `lockout` and `nextChallenge`, …).
public struct AuthenticationResultMessage: Codable, Equatable, Sendable {
    public var nonce: String
    public var outcome: AuthenticationOutcome

    public init(nonce: String, outcome: AuthenticationOutcome) {
        self.nonce = nonce
        self.outcome = outcome
    }

    private enum CodingKeys: String, CodingKey {
        case nonce, outcome, serviceLogin, loginToken, lockout, nextChallenge, mergedEmail, userLogin, apiAccess
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        nonce = try container.decode(String.self, forKey: .nonce)
        let name = try container.decode(String.self, forKey: .outcome)
        switch name {
        case "serviceLogin":
            outcome = .serviceLogin(
                try container.decode(ServiceLoginMessage.self, forKey: .serviceLogin),
                loginToken: try container.decodeIfPresent(String.self, forKey: .loginToken))
        case "lockout":
            outcome = .lockout(
                try container.decode(LockoutMessage.self, forKey: .lockout),
                nextChallenge: try container.decodeIfPresent(String.self, forKey: .nextChallenge))
        case "mergeComplete":
            outcome = .mergeComplete(mergedEmail: try container.decode(String.self, forKey: .mergedEmail))
        case "userLogin":
            outcome = .userLogin(try container.decode(UserLoginMessage.self, forKey: .userLogin))
        case "apiAccess":
            outcome = .apiAccess(try container.decode(ApiAccessGrantMessage.self, forKey: .apiAccess))
        default:
            throw DecodingError.dataCorruptedError(
                forKey: .outcome, in: container, debugDescription: "no outcome is named \(name.prefix(32))")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(nonce, forKey: .nonce)
        try container.encode(outcome.name, forKey: .outcome)
        switch outcome {
        case .serviceLogin(let login, let token):
            try container.encode(login, forKey: .serviceLogin)
            try container.encodeIfPresent(token, forKey: .loginToken)
        case .lockout(let lock, let next):
            try container.encode(lock, forKey: .lockout)
            try container.encodeIfPresent(next, forKey: .nextChallenge)
        case .mergeComplete(let email): try container.encode(email, forKey: .mergedEmail)
        case .userLogin(let login): try container.encode(login, forKey: .userLogin)
        case .apiAccess(let grant): try container.encode(grant, forKey: .apiAccess)
        }
    }
}

public struct TokenRequest: Codable, Equatable, Sendable {
    public var authorizationCode: String
    public var nonce: String

    public init(authorizationCode: String, nonce: String) {
        self.authorizationCode = authorizationCode
        self.nonce = nonce
    }
}

/// The login token: signed by the manager, bound to the host, the local user and the client's nonce.
public struct LoginTokenMessage: Codable, Equatable, Sendable {
    public var nonce: String
    /// The account (its email address).
    public var subject: String
    public var deviceId: String
    public var activationId: String
    public var service: String
    public var role: String
    public var host: String
    public var localUser: String
    public var attributes: [String: String]
    public var issuedAt: Int64
    public var expiresAt: Int64

    public init(
        nonce: String, subject: String, deviceId: String, activationId: String, service: String, role: String,
        host: String,
        localUser: String, attributes: [String: String], issuedAt: Int64, expiresAt: Int64
    ) {
        self.nonce = nonce
        self.subject = subject
        self.deviceId = deviceId
        self.activationId = activationId
        self.service = service
        self.role = role
        self.host = host
        self.localUser = localUser
        self.attributes = attributes
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
    }
}

extension AuthenticationPurpose: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        switch self {
        case .login(let service): try Limit.text("purpose.login.service", service, maximum: WireLimit.identifier)
        case .confirmation(let id): try Limit.text("purpose.confirmation.id", id, maximum: WireLimit.identifier)
        case .merge(let sessionId): try Limit.text("purpose.merge.sessionId", sessionId, maximum: WireLimit.identifier)
        case .apiAccess: break
        }
    }
}

extension AuthenticationStartRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("deviceId", deviceId, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.text("challenge", challenge, maximum: WireLimit.nonce)
        try Limit.require(
            IdentifierValidator.isValid(host, length: 1...WireLimit.hostName), "host",
            "is not a host name of 1 to 253 characters")
        try Limit.line("localUser", localUser, maximum: WireLimit.localUser, allowsEmpty: false)
        try Limit.text("nonce", nonce, maximum: WireLimit.nonce)
        try Limit.text("confirmationCode", confirmationCode, maximum: WireLimit.confirmationCode, allowsEmpty: true)
        try purpose.checkLimits()
        if case .confirmation = purpose {
            try Limit.require(
                confirmationCode != nil, "confirmationCode",
                "is missing: approving a login needs the code the host shows")
        } else {
            try Limit.require(confirmationCode == nil, "confirmationCode", "belongs to purpose confirmation only")
        }
        try offlineReport?.checkLimits()
    }
}

extension AuthenticationFinishRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("authenticationId", authenticationId, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.text("nonce", nonce, maximum: WireLimit.nonce)
        try Limit.text("role", role, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.list("factors", factors, maximum: WireLimit.factors)
        try Limit.text("tokenNonce", tokenNonce, maximum: WireLimit.nonce)
        try Limit.list("attributeValues", attributeValues, maximum: WireLimit.attributes) {
            (entry) throws(LimitViolation) in
            try Limit.text("a name in attributeValues", entry.key, maximum: WireLimit.attributeName, allowsEmpty: true)
            try Limit.text(
                "attributeValues[\(entry.key)]", entry.value, maximum: WireLimit.attributeValue, allowsEmpty: true)
        }
        try Limit.list("attributeSelections", attributeSelections, maximum: WireLimit.attributes)
        try Limit.digest("biometricEnrolment", biometricEnrolment)
    }
}

extension TokenRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("authorizationCode", authorizationCode, maximum: WireLimit.nonce, allowsEmpty: true)
        try Limit.text("nonce", nonce, maximum: WireLimit.nonce)
    }
}

extension AuthenticationStartMessage: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("authenticationId", authenticationId, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.text("challenge", challenge, maximum: WireLimit.nonce, allowsEmpty: true)
        try Limit.require(!roles.isEmpty, "roles", "is empty")
        try Limit.list("roles", roles, maximum: WireLimit.roles)
        try Limit.list("attributes", attributes, maximum: WireLimit.serviceAttributes)
    }
}

extension AuthenticationResultMessage: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        switch outcome {
        case .serviceLogin(let login, _):
            try Limit.text(
                "serviceLogin.authorizationCode", login.authorizationCode, maximum: WireLimit.nonce, allowsEmpty: true)
        case .lockout(_, let next): try Limit.text("nextChallenge", next, maximum: WireLimit.nonce, allowsEmpty: true)
        case .apiAccess(let grant):
            try Limit.text("apiAccess.grant", grant.grant, maximum: WireLimit.nonce, allowsEmpty: true)
        case .mergeComplete, .userLogin: break
        }
    }
}
