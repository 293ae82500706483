/// One security event: who did what to which account, from where. `xign-manager admin audit` lists them.
public struct AuditEvent: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable, CaseIterable {
        case login, loginFailure, lockout, unlock, enrolment, revocation
        case accountCreated, loginNameSet, hostGroupsSet, localGroupsSet, hostAdded, hostJoined, hostRemoved
        /// The api access processes a device finished.
        case pinChanged, activationRequested, accountDeleted, factorAdded
        /// A login a device's TPM let in while the manager could not be reached, as the device reported it.
        case offlineLogin
        /// An administrator gave an account its own offline policy, or took it away.
        case offlinePolicySet
        /// An administrator locked an account (`unlock` lifts it), or gave or took a console role.
        case accountLocked, roleSet
        /// An attempt at the approval page the manager refused: a wrong code, another account's device.
        case approvalRefused
        /// A login found the user's enrolled fingers changed, so the device's biometric factor was removed.
        case biometricInvalidated
        /// An administrator let an account be the hosts' own local user of its login name, or took that away.
        case localUserSet
        /// An approved SSH login covered its audit session, and the cover ended (the session closed, an administrator
        /// ended it, a lock); a sudo it covered is a `login` whose detail names the approval.
        case sessionCoverOpened, sessionCoverEnded
        /// An administrator set a host group's sudo policy for a PAM service.
        case sudoPolicySet
        /// A row written by a newer manager.
        case unknown
    }

    /// Milliseconds since 1970.
    public var at: Int64
    public var event: Kind
    public var email: String?
    public var activationId: String?
    /// The host a login was for, or the host an admin action concerns.
    public var host: String?
    public var service: String?
    public var detail: String?
    /// "device <id>", "admin <unix user>", "console <email>", or "manager".
    public var actor: String
}

extension AuditEvent {
    /// An event happening now; what it does not concern stays nil.
    init(
        _ event: Kind, email: String? = nil, activationId: String? = nil, host: String? = nil, service: String? = nil,
        detail: String? = nil,
        actor: String
    ) {
        self.init(
            at: IdentityManager.now(), event: event, email: email, activationId: activationId, host: host,
            service: service, detail: detail,
            actor: actor)
    }
}
