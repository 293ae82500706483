import Foundation
import XignCrypto
import XignManagerConfiguration
import XignProtocol

/// What `xign-manager admin` shows and changes: accounts, activations, hosts and the audit. Every change is audited
/// with the Unix user who made it.
public struct Administration: Sendable {
    let manager: IdentityManager
    /// Who acts, for the audit, when it is not the Unix user running the command: "console <email>".
    var actor: String? = nil
    /// What the actor may do to whom: a console user's role; the command line acts as an administrator.
    var roles = RoleRules(actor: nil)

    /// The pseudonym a deleted account's address has in the audit (ManagerSecrets), for `admin audit --email`.
    public func pseudonym(ofEmail email: String) -> String { manager.secrets.pseudonym(ofEmail: email) }

    /// Who runs an admin command, for the audit: the Unix user.
    var administrator: String {
        if let actor { return actor }
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
        try await manager.database.transaction { store in try await store.auditEvents(since: since, limit: limit) }
    }

    /// One page of the accounts, in address order.
    public func accounts(_ page: ListPage = .first) async throws -> Page<IdentityManager.AccountSummary> {
        try await manager.database.read { store in
            let mappings = try await store.localGroupMappings()
            let accounts = try await store.accountSummaries(after: page.after, limit: page.limit).map { account in
                var account = account
                account.localGroups = Set(account.hostGroups.flatMap { mappings[$0] ?? [] }).sorted()
                return account
            }
            return page.cut(accounts, key: \.email)
        }
    }

    public func activations(email: String?) async throws -> [IdentityManager.ActivationSummary] {
        try await manager.database.transaction { store in try await store.activationSummaries(email: email) }
    }

    /// New activation data for an activation, mailed to its account; the data before it stops working. The
    /// administrator's way to move or add a machine when no enrolled one is at hand. Returns the address and the expiry.
    public func reissueActivationData(activationId: String) async throws -> (email: String, validUntil: Int64) {
        let secret = Base32.encode(try SecureRandom.bytes(16))
        let validUntil = IdentityManager.now() + manager.configuration.activationDataLifetimeMilliseconds
        let (email, mailId) = try await manager.database.transaction { store -> (String, String) in
            let notFound = ManagerError(
                .notFound, .activationNotFound,
                "no activation \(activationId) that is not revoked; `xign-manager admin activations` lists them")
            guard let activation = try await store.activation(id: activationId) else { throw notFound }
            _ = try await self.target(activation.email, for: .other, in: store)
            guard
                try await store.replaceSecret(
                    activationId: activationId, hash: IdentityManager.hashed(secret), validUntil: validUntil)
            else { throw notFound }
            let payload = PersonalizationPayload(
                managerURL: manager.managerURL, activationId: activation.id, activationSecret: secret,
                managerKeyFingerprint: manager.signer.publicKey.shortFingerprint)
            let mailId = try await manager.mail.queue(
                Outbox.activationMail(to: activation.email, alias: activation.alias, payload: payload, backup: true),
                in: store)
            try await store.recordAudit(
                self.adminEvent(.activationRequested, email: activation.email, activationId: activation.id))
            return (activation.email, mailId)
        }
        await manager.mail.deliver(id: mailId)
        manager.logger.notice("activation data reissued by administrator", metadata: ["activation": "\(activationId)"])
        return (email, validUntil)
    }

    /// Lifts a lockout, including a permanent one: the administrator's way back for a user who proved who they are.
    public func unlock(activationId: String) async throws {
        try await manager.database.transaction { store in
            guard try await store.clearLockout(activationId: activationId) else {
                throw ManagerError(
                    .notFound, .activationNotFound,
                    "no activation \(activationId); `xign-manager admin activations` lists them")
            }
            try await store.recordAudit(
                self.adminEvent(
                    .unlock, email: try await store.activation(id: activationId)?.email, activationId: activationId))
        }
        manager.logger.notice("lockout lifted by administrator", metadata: ["activation": "\(activationId)"])
    }

    /// A name an administrator may give: valid, and not a system account's, which no account may log in as.
    static func checkLoginName(_ name: String) throws {
        guard LoginNameValidator.validate(name) == .valid else {
            throw ManagerError.badRequest(
                "'\(name.prefix(64))' is not a login name: a lower-case letter or _, then lower-case letters, digits, _, - or ., at most 32"
            )
        }
        guard !ReservedNames.contains(name) else {
            throw ManagerError.badRequest(
                "'\(name)' is reserved: a system account's or group's name, or a cloud image's first user; no account may log in to hosts as it"
            )
        }
    }

    /// Gives the account with `email` the login name hosts ask for (nil removes it).
    public func setLoginName(_ loginName: String?, email: String) async throws {
        if let loginName { try Self.checkLoginName(loginName) }
        try await manager.database.transaction { store in
            _ = try await self.target(email, for: .other, in: store)
            if let loginName, try await store.isLoginNameTaken(loginName) {
                throw ManagerError(.conflict, .conflict, "another account has the login name \(loginName)")
            }
            guard let accountId = try await store.setLoginName(loginName, email: email.lowercased()) else {
                throw ManagerError(
                    .notFound, .notFound, "no account \(email.prefix(254)); `xign-manager admin accounts` lists them")
            }
            if loginName != nil {
                try await store.assignUnixId(accountId: accountId, range: self.manager.configuration.uidRange)
            }
            try await store.recordAudit(
                self.adminEvent(.loginNameSet, email: email.lowercased(), detail: loginName ?? "removed"))
        }
        manager.logger.notice("login name set", metadata: ["email": "\(email)", "loginName": "\(loginName ?? "-")"])
    }

    /// Whether hosts may log the account with `email` in as their own local user of its login name, whatever that
    /// user's uid (hosts whose users were made by hand); without it only the manager's own user, with the account's uid,
    /// is confirmed (H5).
    public func setMapsLocalUser(_ maps: Bool, email: String) async throws {
        try await manager.database.transaction { store in
            let accountId = try await self.target(email, for: .other, in: store).id
            try await store.setMapsLocalUser(maps, accountId: accountId)
            try await store.recordAudit(
                self.adminEvent(
                    .localUserSet, email: email.lowercased(),
                    detail: maps ? "hosts' own local user of its login name" : "only its own uid"))
        }
        manager.logger.notice("local user mapping set", metadata: ["email": "\(email)", "maps": "\(maps)"])
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
        let policy = manager.configuration.pinPolicy
        var pin = ""
        repeat {
            pin = String((0..<policy.minLength).map { _ in Character(String(Int.random(in: 0...9))) })
        } while policy.validate(pin) != .valid
        let account = IdentityManager.NewAccount(
            email: email.lowercased(), loginName: loginName, attributes: [:], arbitraryAttributes: nil,
            serviceMappingId: nil,
            organization: organization)
        _ = try await manager.activations.createAccount(
            account, pin: pin, alias: organization.map { "\($0) invite" }, by: administrator)
        manager.logger.info(
            organization == nil ? "account created by administrator" : "organization invite",
            metadata: [
                "email": "\(email)", "organization": "\(organization ?? "-")",
            ])
        return pin
    }
    /// Deletes the account with `email` and all it holds, as its own device may (`xign-setup account delete`): the
    /// administrator's way to offboard a person. Its uid is never given again. Returns how many devices it had.
    public func deleteAccount(email: String) async throws -> Int {
        let secrets = manager.secrets
        let devices = try await manager.database.transaction { store in
            let accountId = try await self.target(email, for: .delete, in: store).id
            let devices = try await store.deleteAccount(accountId, pseudonym: secrets.pseudonym(ofEmail:))
            try await store.recordAudit(
                self.adminEvent(
                    .accountDeleted, email: secrets.pseudonym(ofEmail: email.lowercased()),
                    detail: "with \(devices) device(s), by the administrator"))
            return devices
        }
        manager.logger.notice("account deleted by administrator", metadata: ["devices": "\(devices)"])
        return devices
    }

    /// A join token for a new host `name`; an earlier token for that name is void. Refused while a host has the name.
    public func addHost(
        name: String, groups: [String] = [], validFor lifetime: Duration = IdentityManager.hostJoinTokenLifetime
    ) async throws -> HostJoinToken {
        guard HostNameValidator.isValid(name) else {
            throw ManagerError.badRequest(
                "'\(name.prefix(64))' is not a host name: use 1 to 253 letters, digits, dots and dashes")
        }
        try Self.checkGroupNames(groups)
        let token = HostJoinToken(
            secret: try SecureRandom.token(byteCount: 16), managerKeyFingerprint: manager.signer.publicKey.fingerprint)
        let expiresAt = IdentityManager.now() + lifetime.components.seconds * 1000
        try await manager.database.transaction { store in
            guard try await !store.isHostNameTaken(name) else {
                throw ManagerError(
                    .conflict, .conflict,
                    "a host named \(name) has joined already; `xign-manager admin hosts remove \(name)` first")
            }
            try await store.insertHostJoinToken(
                hash: IdentityManager.hashed(token.secret), name: name, expiresAt: expiresAt)
            try await store.setGroups(groups, hostName: name)
            try await store.recordAudit(
                self.adminEvent(
                    .hostAdded, host: name, detail: groups.isEmpty ? nil : "groups \(groups.joined(separator: ","))"))
        }
        manager.logger.notice("host join token issued", metadata: ["host": "\(name)"])
        return token
    }

    /// One page of the hosts that joined, in name order.
    public func hosts(_ page: ListPage = .first) async throws -> Page<IdentityManager.HostSummary> {
        try await manager.database.read { store in
            let hosts = try await store.hosts(after: page.after, limit: page.limit)
            let groups = try await hosts.last.asyncMap {
                try await store.groups(ofHostsAfter: page.after, through: $0.name)
            }
            let summaries = hosts.map { host in
                IdentityManager.HostSummary(
                    id: host.id, name: host.name, groups: groups?[host.name] ?? [],
                    keyKind: host.ekIssuer == nil ? host.keyKind.rawValue : "attested", ekIssuer: host.ekIssuer,
                    keyFingerprint: host.publicKey.fingerprint, joinedAt: host.createdAt)
            }
            return page.cut(summaries, key: \.name)
        }
    }

    /// Removes a host, or the join token waiting for it.
    public func removeHost(name: String) async throws {
        try await manager.database.transaction { store in
            guard try await store.removeHost(name: name) else {
                throw ManagerError(
                    .notFound, .notFound, "no host named \(name.prefix(64)); `xign-manager admin hosts list` shows them"
                )
            }
            try await store.recordAudit(self.adminEvent(.hostRemoved, host: name))
        }
        manager.logger.notice("host removed", metadata: ["host": "\(name)"])
    }

    /// Lets the account with `email` log in to hosts in one of `groups` (`everyHost`: all of them; none: no host).
    public func setHostGroups(_ groups: [String], email: String) async throws {
        try Self.checkGroupNames(groups.filter { $0 != IdentityManager.everyHost })
        try await manager.database.transaction { store in
            let accountId = try await self.target(email, for: .other, in: store).id
            try await store.setHostGroups(groups, accountId: accountId)
            try await store.recordAudit(
                self.adminEvent(
                    .hostGroupsSet, email: email.lowercased(),
                    detail: groups.isEmpty ? "no host" : groups.joined(separator: ",")))
        }
        manager.logger.notice(
            "host groups set", metadata: ["email": "\(email)", "groups": "\(groups.joined(separator: ","))"])
    }

    /// The upgrade step for host access: every account with a login name and no host groups, which could log in to any
    /// host before access was explicit, keeps that (`*`). Returns their addresses.
    public func keepOpenHostAccess() async throws -> [String] {
        try await manager.database.transaction { store in
            let accounts = try await store.accountsWithoutHostGroups()
            for account in accounts {
                try await store.setHostGroups([IdentityManager.everyHost], accountId: account.id)
                try await store.recordAudit(
                    self.adminEvent(.hostGroupsSet, email: account.email, detail: "every host (kept at the upgrade)"))
            }
            return accounts.map(\.email)
        }
    }

    /// The local groups (`sudo`, `docker`, ...) members of `hostGroup` join on the hosts in it; none removes them.
    /// A local group must exist on a host, which serves only those it has.
    public func setLocalGroups(_ localGroups: [String], hostGroup: String) async throws {
        try Self.checkGroupNames([hostGroup])
        for group in localGroups where !LocalGroupName.isValid(group) {
            throw ManagerError.badRequest(
                "'\(group.prefix(64))' is not a local group name: a lower-case letter or _, then lower-case letters, digits, _, - or ., at most 32"
            )
        }
        for group in localGroups where LocalGroupName.rootEquivalent.contains(group) {
            throw ManagerError.badRequest(
                "\(group) gives what only root has; no host grants it (make such people root on the hosts instead)")
        }
        guard localGroups.count <= WireLimit.localGroups else {
            throw ManagerError.badRequest("a host group maps to at most \(WireLimit.localGroups) local groups")
        }
        try await manager.database.transaction { store in
            try await store.setLocalGroups(localGroups, hostGroup: hostGroup)
            try await store.recordAudit(
                self.adminEvent(
                    .localGroupsSet,
                    detail: "\(hostGroup): " + (localGroups.isEmpty ? "none" : localGroups.joined(separator: ","))))
        }
        manager.logger.notice(
            "local groups set",
            metadata: ["hostGroup": "\(hostGroup)", "groups": "\(localGroups.joined(separator: ","))"])
    }

    /// Every host group's local groups.
    public func localGroups() async throws -> [String: [String]] {
        try await manager.database.transaction { store in try await store.localGroupMappings() }
    }

    private static func checkGroupNames(_ groups: [String]) throws {
        for group in groups where !HostNameValidator.isValid(group) || group.utf8.count > WireLimit.identifier {
            throw ManagerError.badRequest(
                "'\(group.prefix(64))' is not a group name: use 1 to 64 letters, digits, dots and dashes")
        }
    }
    /// An account's own offline policy (nil: the manager's). `grace` 0 turns offline login off for the account.
    public func setOfflinePolicy(graceMilliseconds: Int64?, maxFailures: Int?, email: String) async throws {
        if let graceMilliseconds, !ManagerConfiguration.Offline.graceRange.contains(graceMilliseconds) {
            throw ManagerError.badRequest("the offline grace must be from 0 to 90 days")
        }
        if let maxFailures, !ManagerConfiguration.Offline.maxFailuresRange.contains(maxFailures) {
            throw ManagerError.badRequest("the wrong offline PINs allowed must be from 1 to 20")
        }
        try await manager.database.transaction { store in
            _ = try await self.target(email, for: .other, in: store)
            guard
                try await store.setOfflinePolicy(
                    graceMilliseconds: graceMilliseconds, maxFailures: maxFailures, email: email.lowercased())
            else {
                throw ManagerError(
                    .notFound, .notFound, "no account \(email.prefix(254)); `xign-manager admin accounts` lists them")
            }
            let detail =
                graceMilliseconds == nil && maxFailures == nil
                ? "the manager's"
                : "grace \(graceMilliseconds.map { "\($0 / 1000) s" } ?? "the manager's"), \(maxFailures.map(String.init) ?? "the manager's") wrong PINs"
            try await store.recordAudit(self.adminEvent(.offlinePolicySet, email: email.lowercased(), detail: detail))
        }
    }
}

extension Administration {
    /// The account `email` names, once the actor may make `change` of it (RoleRules).
    func target(
        _ email: String, for change: RoleRules.Change, in store: ManagerStore
    ) async throws -> ManagerStore.ConsoleAccount {
        guard let account = try await store.consoleAccount(email: email) else {
            throw ManagerError(
                .notFound, .notFound, "no account \(email.prefix(254)); `xign-manager admin accounts` lists them")
        }
        try await roles.check(change, of: account, in: store)
        return account
    }

    /// Locks the account: none of its devices logs in or approves until it is unlocked. Offline logins on a laptop
    /// go on for their grace, by design (docs/design.md).
    public func lockAccount(email: String) async throws {
        try await manager.database.transaction { store in
            let accountId = try await self.target(email, for: .lock, in: store).id
            try await store.lockAccount(
                accountId, at: IdentityManager.now(), by: self.administrator, role: self.roles.lockingRole)
            let ended = try await store.endSessionCovers(
                accountId: accountId, at: IdentityManager.now(), because: "the account was locked")
            try await store.recordAudit(
                self.adminEvent(
                    .accountLocked, email: email.lowercased(),
                    detail: ended.isEmpty ? nil : "ended \(ended.count) session cover(s)"))
        }
        manager.logger.notice("account locked", metadata: ["email": "\(email)", "by": "\(administrator)"])
    }

    /// Lifts the account's lock and every PIN lockout of its activations.
    public func unlockAccount(email: String) async throws {
        try await manager.database.transaction { store in
            try await store.unlockAccount(try await self.target(email, for: .unlock, in: store).id)
            try await store.recordAudit(self.adminEvent(.unlock, email: email.lowercased(), detail: "the account"))
        }
        manager.logger.notice("account unlocked", metadata: ["email": "\(email)", "by": "\(administrator)"])
    }

    /// Gives the account a console role, or takes it (nil); never the last unlocked administrator's (RoleRules).
    public func setRole(_ role: ConsoleRole?, email: String) async throws {
        try await manager.database.transaction { store in
            let accountId = try await self.target(email, for: .setRole(role), in: store).id
            try await store.setRole(role, accountId: accountId)
            try await store.recordAudit(
                self.adminEvent(.roleSet, email: email.lowercased(), detail: role?.rawValue ?? "none"))
        }
        manager.logger.notice(
            "console role set", metadata: ["email": "\(email)", "role": "\(role?.rawValue ?? "none")"])
    }

    /// Removes a device of the account with `email`, with its activation: a lost or stolen one.
    public func revokeDevice(_ deviceId: String, email: String) async throws {
        let mailId = try await manager.database.transaction { store -> String in
            let accountId = try await self.target(email, for: .other, in: store).id
            guard let device = try await store.device(deviceId, holdingItsActivation: true),
                try await store.accountId(ofDevice: deviceId) == accountId,
                let held = try await store.activation(id: device.activationId)
            else {
                throw ManagerError(
                    .notFound, .deviceNotFound, "\(email.prefix(254)) has no device \(deviceId.prefix(64))")
            }
            try await store.revokeDevice(device.id)
            try await store.markRevoked(activationId: device.activationId)
            try await store.recordAudit(
                self.adminEvent(
                    .revocation, email: held.email, activationId: held.id,
                    detail: "\(device.keyKind.rawValue) device \(device.id) removed by an administrator"))
            return try await self.manager.mail.queue(
                Outbox.deviceNotice(
                    to: held.email, alias: held.alias, device: "device \(device.id) (\(device.keyKind.rawValue))",
                    added: false),
                in: store)
        }
        await manager.mail.deliver(id: mailId)
    }
}

extension IdentityManager {
    /// The administrator's operations on this manager's data.
    public var administration: Administration { Administration(manager: self) }

    /// The same operations, audited as `actor`'s.
    func administration(by actor: String, role: ConsoleRole) -> Administration {
        Administration(manager: self, actor: actor, roles: RoleRules(actor: role))
    }
}
