import Foundation
import XignCrypto
import XignProtocol

/// What `xign-manager admin` shows and changes.
extension IdentityManager {
    /// What stands for `email` in the audit once its account is deleted: the same for the same address (so an
    /// administrator who knows it can find the entries, `admin audit --email`), and nothing that gives it back.
    public func pseudonym(ofEmail email: String) -> String {
        let code = HMACSHA256.authenticationCode(
            for: Data("audit-email\n\(email.lowercased())".utf8), key: secrets.recordKey)
        return "deleted-" + Base64URL.encode(code.prefix(16))
    }

    public struct AccountSummary: Codable, Sendable {
        public var email: String
        public var loginName: String?
        /// The name the registrant asked for, until an administrator gives one.
        public var requestedLoginName: String?
        /// The host groups the account may log in to (`*`: every host); empty means none.
        public var hostGroups: [String]
        public var organization: String?
        public var isTemporary: Bool
        public var activations: Int
        public var createdAt: Int64
    }

    public struct ActivationSummary: Codable, Sendable {
        public var id: String
        public var email: String
        public var alias: String
        public var state: ActivationState
        public var deviceId: String?
        public var keyKind: KeyKind?
        /// The device that holds the activation (Nevis's device information); nil while none does.
        public var deviceName: String?
        public var platform: String?
        public var factors: [AuthenticatorType]?
        public var enrolledAt: Int64?
        public var lastUsedAt: Int64?
        /// A passkey device's credential id, and whether it may be copied to other devices (a synced passkey).
        public var credentialId: String?
        public var synced: Bool?
        /// A TPM key's attestation: the EK certificate's issuer, or why the key is not attested.
        public var ekIssuer: String?
        public var unattestedBecause: String?
        public var failedAttempts: Int
        public var lockedUntil: Int64
        public var permanentlyLocked: Bool
    }

    /// Who runs an admin command, for the audit: the Unix user.
    var administrator: String {
        guard let entry = getpwuid(geteuid()), let name = entry.pointee.pw_name else { return "admin uid \(geteuid())" }
        return "admin \(String(cString: name))"
    }

    func adminEvent(
        _ kind: AuditEvent.Kind, email: String? = nil, activationId: String? = nil, host: String? = nil,
        detail: String? = nil
    ) -> AuditEvent {
        AuditEvent(kind, email: email, activationId: activationId, host: host, detail: detail, actor: administrator)
    }

    /// The audit from `since` (milliseconds since 1970), oldest first.
    public func auditEvents(since: Int64, limit: Int = 100_000) async throws -> [AuditEvent] {
        try await database.transaction { store in try await store.auditEvents(since: since, limit: limit) }
    }

    /// Logins waiting for approval on a device, across all accounts (the /metrics gauge).
    func pendingConfirmationCount() async throws -> Int {
        try await database.read { store in try await store.pendingConfirmationCount(now: Self.now()) }
    }

    public func accounts() async throws -> [AccountSummary] {
        try await database.transaction { store in try await store.accountSummaries() }
    }

    public func activations(email: String?) async throws -> [ActivationSummary] {
        try await database.transaction { store in try await store.activationSummaries(email: email) }
    }

    /// New activation data for an activation, mailed to its account; the data before it stops working. The
    /// administrator's way to move or add a machine when no enrolled one is at hand. Returns the address and the expiry.
    public func reissueActivationData(activationId: String) async throws -> (email: String, validUntil: Int64) {
        let secret = Base32.encode(try SecureRandom.bytes(16))
        let validUntil = Self.now() + configuration.activationDataLifetimeMilliseconds
        let (email, mailId) = try await database.transaction { store -> (String, String) in
            guard let activation = try await store.activation(id: activationId),
                try await store.replaceSecret(
                    activationId: activationId, hash: Self.hashed(secret), validUntil: validUntil)
            else {
                throw ManagerError(
                    .notFound, .activationNotFound,
                    "no activation \(activationId) that is not revoked; `xign-manager admin activations` lists them")
            }
            let payload = PersonalizationPayload(
                managerURL: self.managerURL, activationId: activation.id, activationSecret: secret,
                managerKeyFingerprint: self.signer.publicKey.shortFingerprint)
            let mailId = try await self.mail.queue(
                Outbox.activationMail(to: activation.email, alias: activation.alias, payload: payload, backup: true),
                in: store)
            try await store.recordAudit(
                self.adminEvent(.activationRequested, email: activation.email, activationId: activation.id))
            return (activation.email, mailId)
        }
        await mail.deliver(id: mailId)
        logger.notice("activation data reissued by administrator", metadata: ["activation": "\(activationId)"])
        return (email, validUntil)
    }

    /// Lifts a lockout, including a permanent one: the administrator's way back for a user who proved who they are.
    public func unlock(activationId: String) async throws {
        try await database.transaction { store in
            guard try await store.clearLockout(activationId: activationId) else {
                throw ManagerError(
                    .notFound, .activationNotFound,
                    "no activation \(activationId); `xign-manager admin activations` lists them")
            }
            try await store.recordAudit(
                self.adminEvent(
                    .unlock, email: try await store.activation(id: activationId)?.email, activationId: activationId))
        }
        logger.notice("lockout lifted by administrator", metadata: ["activation": "\(activationId)"])
    }

    /// A name an administrator may give: valid, and not a system account's, which no account may log in as.
    static func checkLoginName(_ name: String) throws {
        guard LoginNameValidator.validate(name) == .valid else {
            throw ManagerError.badRequest(
                "'\(name.prefix(64))' is not a login name: a lower-case letter or _, then lower-case letters, digits, _, - or ., at most 32"
            )
        }
        guard !LoginNameValidator.isSystemAccountName(name) else {
            throw ManagerError.badRequest("'\(name)' is a system account's name; no account may log in to hosts as it")
        }
    }

    /// Gives the account with `email` the login name hosts ask for (nil removes it).
    public func setLoginName(_ loginName: String?, email: String) async throws {
        if let loginName { try Self.checkLoginName(loginName) }
        try await database.transaction { store in
            if let loginName, try await store.isLoginNameTaken(loginName) {
                throw ManagerError(.conflict, .conflict, "another account has the login name \(loginName)")
            }
            guard try await store.setLoginName(loginName, email: email.lowercased()) else {
                throw ManagerError(
                    .notFound, .notFound, "no account \(email.prefix(254)); `xign-manager admin accounts` lists them")
            }
            try await store.recordAudit(
                self.adminEvent(.loginNameSet, email: email.lowercased(), detail: loginName ?? "removed"))
        }
        logger.notice("login name set", metadata: ["email": "\(email)", "loginName": "\(loginName ?? "-")"])
    }

    /// An account the administrator creates, for a manager with `registration.open = false` or as an organization
    /// invite (`organization` set: a temporary account that a merge folds into an existing one). The manager
    /// chooses the activation PIN and returns it, for the administrator to hand over by another channel than the mail.
    public func createAccount(
        email: String, loginName: String? = nil, organization: String? = nil
    ) async throws -> String {
        guard EmailValidator.validate(email) == .valid else {
            throw ManagerError.badRequest("'\(email.prefix(254))' is not a valid email address")
        }
        if let organization, TextAttributeValidator.validate(organization) != .valid {
            throw ManagerError.badRequest("the organization name is empty or too long")
        }
        if let loginName { try Self.checkLoginName(loginName) }
        let policy = configuration.pinPolicy
        var pin = ""
        repeat {
            pin = String((0..<policy.minLength).map { _ in Character(String(Int.random(in: 0...9))) })
        } while policy.validate(pin) != .valid
        let account = NewAccount(
            email: email.lowercased(), loginName: loginName, attributes: [:], arbitraryAttributes: nil,
            serviceMappingId: nil,
            organization: organization)
        _ = try await createAccount(account, pin: pin, alias: organization.map { "\($0) invite" }, by: administrator)
        logger.info(
            organization == nil ? "account created by administrator" : "organization invite",
            metadata: [
                "email": "\(email)", "organization": "\(organization ?? "-")",
            ])
        return pin
    }
}
