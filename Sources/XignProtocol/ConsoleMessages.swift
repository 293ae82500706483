import FoundationEssentials

// The administrator's console: a session opened with passkey and PIN by an account with a role, and changes each
// signed with a fresh passkey assertion (docs/protocol.md, "The console").

extension APIPath {
    /// Opens a console session with a `console` api access grant; answers with its cookie.
    public static let consoleSessions = "/v1/console/sessions"
    public static let consoleSessionEnd = "/v1/console/sessions/end"
    /// One change, device-signed over a /v1/challenges challenge by the session's device.
    public static let consoleActions = "/v1/console/actions"
}

/// What an account may do in the administrator's console. An administrator does everything; a helpdesk handles the
/// calls of people who are locked out or lost a device, and may neither delete an account nor give a role.
public enum ConsoleRole: String, Codable, Sendable, CaseIterable {
    case admin
    case helpdesk

    public func may(_ action: ConsoleAction) -> Bool {
        switch (self, action) {
        case (.admin, _): true
        case (.helpdesk, .lock), (.helpdesk, .unlock), (.helpdesk, .reissueActivation), (.helpdesk, .endCover): true
        case (.helpdesk, _): false
        }
    }
}

/// The changes the console makes; each takes a fresh passkey assertion and is audited with who made it.
public enum ConsoleAction: String, Codable, Sendable, CaseIterable {
    case lock
    case unlock
    case setLoginName
    case setHostGroups
    case revokeDevice
    case reissueActivation
    case setRole
    case delete
    case setOfflinePolicy
    /// Ends one of the account's session covers (`coverId`).
    case endCover
    /// Makes an account and mails its activation data; the answer holds its activation PIN, once.
    case invite
    /// Issues a join token for a new host; the answer holds it, once.
    case addHost
    case removeHost
    /// Sets what a sudo needs on a host group's hosts (`hostGroup`, `service`, `sudoPolicy`).
    case setSudoPolicy

    /// Whether the action changes one account, named by `accountId`.
    public var concernsAnAccount: Bool { ![.invite, .addHost, .removeHost, .setSudoPolicy].contains(self) }
}

/// A change made in the console. `accountId` names the account it is made to; the other fields belong to one action
/// each.
public struct ConsoleActionRequest: Codable, Equatable, Sendable {
    public var deviceId: String
    public var challenge: String
    public var action: ConsoleAction
    /// The account the change is made to, for every action that concerns one.
    public var accountId: String?
    /// setLoginName: the name, or nil to remove it.
    public var loginName: String?
    /// setHostGroups.
    public var hostGroups: [String]?
    /// setRole: nil takes the role.
    public var role: ConsoleRole?
    /// revokeDevice.
    public var targetDeviceId: String?
    /// reissueActivation.
    public var activationId: String?
    /// invite: the new account's address.
    public var email: String?
    /// addHost, removeHost; addHost takes `hostGroups` too.
    public var hostName: String?
    /// setOfflinePolicy: nil for the manager's own; a grace of 0 turns offline login off.
    public var offlineGraceSeconds: Int64?
    public var offlineMaxFailures: Int?
    /// endCover.
    public var coverId: String?
    /// setSudoPolicy: the host group (`*` for every host) and PAM service (`*` or nil for every service); a nil policy
    /// removes the line.
    public var hostGroup: String?
    public var service: String?
    public var sudoPolicy: SudoPolicy?

    public init(deviceId: String, challenge: String, action: ConsoleAction, accountId: String?) {
        (self.deviceId, self.challenge, self.action, self.accountId) = (deviceId, challenge, action, accountId)
    }
}

/// What a change did, in a sentence for the page.
public struct ConsoleActionMessage: Codable, Equatable, Sendable {
    public var done: String
    public init(done: String) { self.done = done }
}

/// The session the console opened: whose, with which role, until when.
public struct ConsoleSessionMessage: Codable, Equatable, Sendable {
    public var email: String
    public var role: ConsoleRole
    public var expiresAt: Int64
    public init(email: String, role: ConsoleRole, expiresAt: Int64) {
        (self.email, self.role, self.expiresAt) = (email, role, expiresAt)
    }
}

extension ConsoleActionRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("deviceId", deviceId, maximum: WireLimit.identifier)
        try Limit.text("challenge", challenge, maximum: WireLimit.nonce)
        try Limit.text("accountId", accountId, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.text("email", email, maximum: 254, allowsEmpty: true)
        try Limit.text("hostName", hostName, maximum: WireLimit.hostName, allowsEmpty: true)
        try Limit.text("loginName", loginName, maximum: WireLimit.localUser, allowsEmpty: true)
        try Limit.list("hostGroups", hostGroups ?? [], maximum: WireLimit.idList)
        for group in hostGroups ?? [] { try Limit.text("hostGroups[]", group, maximum: WireLimit.identifier) }
        try Limit.text("targetDeviceId", targetDeviceId, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.text("activationId", activationId, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.text("coverId", coverId, maximum: WireLimit.identifier, allowsEmpty: true)
    }
}
