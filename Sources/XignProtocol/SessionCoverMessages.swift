import FoundationEssentials

// An approval that covers its session: an SSH login a person approved opens a cover for its kernel audit session, and
// a sudo in that audit session passes on it where the host group's policy says `session`. docs/protocol.md,
// "Session covers"; docs/design.md, "An approval covers its session".

extension APIPath {
    /// The host opens a cover for an approved login's session (host-signed over a challenge).
    public static let sessionCovers = "/v1/hosts/covers"
    /// A sudo in a covered session asks whether the cover still holds.
    public static let sessionCoverUse = "/v1/hosts/covers/use"
    /// The session closed: the cover ends.
    public static let sessionCoverEnd = "/v1/hosts/covers/end"
}

extension SignedAnswerType {
    public static let sessionCover = "xign-session-cover+jwt"
}

/// What a sudo (or su, pkexec: any PAM service) in a session an approval covers needs on a host group's hosts.
public enum SudoPolicy: String, Codable, Sendable, CaseIterable, Comparable {
    /// A new approval every time: the default.
    case fresh
    /// The approval of the SSH login covers its audit session, until the session closes, the cover ends or 8 hours.
    case session

    /// Where a host is in several groups, the strictest policy wins.
    public static func < (lhs: SudoPolicy, rhs: SudoPolicy) -> Bool { lhs.strictness < rhs.strictness }
    private var strictness: Int { self == .fresh ? 1 : 0 }

    /// The PAM service that stands for every service a host group names no policy for.
    public static let everyService = "*"

    /// The policy for `service` in a host's resolved table: its own line, else `*`'s, else fresh.
    public static func of(_ service: String?, in table: [String: SudoPolicy]) -> SudoPolicy {
        service.flatMap { table[$0] } ?? table[everyService] ?? .fresh
    }
}

/// The kernel audit session a process is in (`/proc/PID/sessionid`): pam_loginuid gives each login a new one, and only
/// `CAP_AUDIT_CONTROL` moves a process to another. 4294967295 means none was given.
public enum AuditSession {
    public static let unset: Int64 = 4_294_967_295
    public static let valid: ClosedRange<Int64> = 1...4_294_967_294
}

/// Opens a cover: the approval (the confirmation the manager approved for this host), whose login it was and the audit
/// session pam_loginuid gave that login.
public struct SessionCoverRequest: Codable, Equatable, Sendable {
    public var hostId: String
    public var challenge: String
    public var nonce: String
    public var confirmationId: String
    public var loginName: String
    public var auditSession: Int64

    public init(
        hostId: String, challenge: String, nonce: String, confirmationId: String, loginName: String, auditSession: Int64
    ) {
        (self.hostId, self.challenge, self.nonce) = (hostId, challenge, nonce)
        (self.confirmationId, self.loginName, self.auditSession) = (confirmationId, loginName, auditSession)
    }
}

/// Uses a cover for a login by `service` (sudo) in the audit session it was opened for.
public struct SessionCoverUseRequest: Codable, Equatable, Sendable {
    public var hostId: String
    public var challenge: String
    public var nonce: String
    public var coverId: String
    public var loginName: String
    public var service: String
    public var auditSession: Int64

    public init(
        hostId: String, challenge: String, nonce: String, coverId: String, loginName: String, service: String,
        auditSession: Int64
    ) {
        (self.hostId, self.challenge, self.nonce, self.coverId) = (hostId, challenge, nonce, coverId)
        (self.loginName, self.service, self.auditSession) = (loginName, service, auditSession)
    }
}

/// Ends a cover: its session closed.
public struct SessionCoverEndRequest: Codable, Equatable, Sendable {
    public var hostId: String
    public var challenge: String
    public var coverId: String

    public init(hostId: String, challenge: String, coverId: String) {
        (self.hostId, self.challenge, self.coverId) = (hostId, challenge, coverId)
    }
}

/// The signed answer to an opening or a use: the cover, the approval it stands on, until when it holds.
public struct SessionCoverMessage: Codable, Equatable, Sendable {
    public var nonce: String
    public var hostId: String
    public var coverId: String
    public var confirmationId: String
    public var loginName: String
    public var auditSession: Int64
    /// Milliseconds since 1970.
    public var expiresAt: Int64

    public init(
        nonce: String, hostId: String, coverId: String, confirmationId: String, loginName: String, auditSession: Int64,
        expiresAt: Int64
    ) {
        (self.nonce, self.hostId, self.coverId, self.confirmationId) = (nonce, hostId, coverId, confirmationId)
        (self.loginName, self.auditSession, self.expiresAt) = (loginName, auditSession, expiresAt)
    }
}

extension SessionCoverRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("hostId", hostId, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.text("challenge", challenge, maximum: WireLimit.nonce, allowsEmpty: true)
        try Limit.text("nonce", nonce, maximum: WireLimit.nonce)
        try Limit.plainIdentifier("confirmationId", confirmationId)
        try Limit.require(LoginNameValidator.validate(loginName) == .valid, "loginName", "is not a login name")
        try Limit.require(AuditSession.valid.contains(auditSession), "auditSession", "is not an audit session id")
    }
}

extension SessionCoverUseRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("hostId", hostId, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.text("challenge", challenge, maximum: WireLimit.nonce, allowsEmpty: true)
        try Limit.text("nonce", nonce, maximum: WireLimit.nonce)
        try Limit.plainIdentifier("coverId", coverId)
        try Limit.require(LoginNameValidator.validate(loginName) == .valid, "loginName", "is not a login name")
        try Limit.require(
            IdentifierValidator.isValid(service), "service", "must be 1 to 64 printable ASCII characters without spaces"
        )
        try Limit.require(AuditSession.valid.contains(auditSession), "auditSession", "is not an audit session id")
    }
}

extension SessionCoverEndRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("hostId", hostId, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.text("challenge", challenge, maximum: WireLimit.nonce, allowsEmpty: true)
        try Limit.plainIdentifier("coverId", coverId)
    }
}
