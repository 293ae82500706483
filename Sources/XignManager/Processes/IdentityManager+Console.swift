import Foundation
import XignCrypto
import XignProtocol

/// The administrator's console. A session opens with an api access grant for `console` (the account's passkey and
/// PIN, under the lockout of every login) and only for an account that holds a role; the role is read again at every
/// request, so taking it ends the session's power at once. Every change is signed with a fresh passkey assertion by
/// the session's own device, and audited as "console <email>".
extension IdentityManager {
    static let consoleSessionMilliseconds: Int64 = 600_000

    /// Who a console session belongs to.
    public struct ConsoleUser: Sendable {
        public var deviceId: String
        public var accountId: String
        public var email: String
        public var role: ConsoleRole
    }

    /// Opens a console session: the token and what the page shows of it.
    public func openConsoleSession(body: Data, signature: String?) async throws -> (String, ConsoleSessionMessage) {
        let request = try RequestBody.decode(ApiAccessRequest.self, from: body, "the console session request")
        _ = try accountChanges.checkFields(request, for: .console)
        let proof = try RequestVerifier.DeviceProof(header: signature)
        let token = try SecureRandom.token()
        let expiresAt = Self.now() + Self.consoleSessionMilliseconds
        let user = try await database.transaction { store -> ConsoleUser in
            let (grant, process) = try await self.provenGrant(
                request, proof: proof, path: APIPath.consoleSessions, body: body, in: store)
            guard process == .console else {
                throw ManagerError.badRequest("a \(process.rawValue) grant does not open the console")
            }
            guard try await store.redeemAuthorizationCode(request.grant, now: Self.now()) != nil else {
                throw ManagerError(.conflict, .challengeInvalid, "the grant was already used")
            }
            let user = try await self.consoleUser(device: grant.deviceId, in: store)
            try await store.insertWebSession(
                .console, tokenHash: Self.hashed(token), deviceId: grant.deviceId, expiresAt: expiresAt)
            return user
        }
        logger.notice("console session opened", metadata: ["email": "\(user.email)", "role": "\(user.role.rawValue)"])
        return (token, ConsoleSessionMessage(email: user.email, role: user.role, expiresAt: expiresAt))
    }

    public func endConsoleSession(token: String?) async throws {
        guard let token, token.utf8.count <= WireLimit.identifier else { return }
        try await database.transaction { store in
            try await store.deleteWebSession(.console, tokenHash: Self.hashed(token))
        }
    }

    /// The user of a live console session, with the role they hold now; 403 otherwise.
    public func consoleUser(session token: String?) async throws -> ConsoleUser {
        try await database.read { store in
            guard let token, token.utf8.count <= WireLimit.identifier,
                let deviceId = try await store.webSessionDevice(
                    .console, tokenHash: Self.hashed(token), now: Self.now())
            else {
                throw ManagerError(
                    .forbidden, .sessionInvalid,
                    "the console needs a session: sign in at /console with your passkey and PIN")
            }
            return try await self.consoleUser(device: deviceId, in: store)
        }
    }

    private func consoleUser(device deviceId: String, in store: ManagerStore) async throws -> ConsoleUser {
        guard let account = try await store.consoleAccount(ofDevice: deviceId), let role = account.role else {
            throw ManagerError(
                .forbidden, .securityInsufficient,
                "this account holds no console role; an administrator gives it with `xign-manager admin accounts set-role`"
            )
        }
        guard account.lockedAt == nil else { throw ManagerError.accountLocked }
        return ConsoleUser(deviceId: deviceId, accountId: account.id, email: account.email, role: role)
    }

    /// One change, signed by the session's device over a fresh challenge, if the session's role allows it.
    public func performConsoleAction(
        body: Data, signature: String?, session token: String?
    ) async throws
        -> ConsoleActionMessage
    {
        let request = try RequestBody.decode(ConsoleActionRequest.self, from: body, "the console action")
        let user = try await consoleUser(session: token)
        guard request.deviceId == user.deviceId else {
            throw ManagerError(
                .forbidden, .signatureInvalid, "a console change is signed by the passkey that opened the session")
        }
        guard user.role.may(request.action) else {
            throw ManagerError(
                .forbidden, .securityInsufficient,
                "the \(user.role.rawValue) role may not \(request.action.rawValue); ask an administrator")
        }
        let target = try await database.transaction(durability: .unsynced) { store -> ManagerStore.ConsoleAccount? in
            try await self.verifier.verifyDeviceSignature(
                deviceId: request.deviceId, challenge: request.challenge, path: APIPath.consoleActions, body: body,
                signature: signature, in: store)
            guard request.action.concernsAnAccount else { return nil }
            guard let id = request.accountId, let target = try await store.consoleAccount(id: id) else {
                throw ManagerError(
                    .notFound, .notFound, "no account \(request.accountId?.prefix(64) ?? "named"); reload the list")
            }
            return target
        }
        let administration = administration(by: "console \(user.email)", role: user.role)
        guard let target else { return try await performFleetAction(request, administration) }
        if target.id == user.accountId, [ConsoleAction.lock, .delete, .setRole].contains(request.action) {
            throw ManagerError(
                .conflict, .conflict, "an administrator does not \(request.action.rawValue) their own account here")
        }
        let email = target.email
        switch request.action {
        case .lock:
            try await administration.lockAccount(email: email)
            return ConsoleActionMessage(
                done:
                    "Locked \(email): its devices can no longer log in or approve, the hosts refuse it at the next login, an SSH key too, and its sessions' covers ended."
            )
        case .unlock:
            try await administration.unlockAccount(email: email)
            return ConsoleActionMessage(done: "Unlocked \(email), and cleared its wrong PINs.")
        case .setLoginName:
            try await administration.setLoginName(request.loginName.flatMap { $0.isEmpty ? nil : $0 }, email: email)
            return ConsoleActionMessage(done: "Login name of \(email) set.")
        case .setHostGroups:
            try await administration.setHostGroups(try field(request.hostGroups, "hostGroups"), email: email)
            return ConsoleActionMessage(done: "Host groups of \(email) set.")
        case .revokeDevice:
            try await administration.revokeDevice(try field(request.targetDeviceId, "targetDeviceId"), email: email)
            return ConsoleActionMessage(done: "The device was removed; it can no longer log in or approve.")
        case .reissueActivation:
            let activationId = try field(request.activationId, "activationId")
            guard try await administration.activations(email: email).contains(where: { $0.id == activationId }) else {
                throw ManagerError(
                    .notFound, .activationNotFound, "\(email) has no activation \(activationId.prefix(64))")
            }
            _ = try await administration.reissueActivationData(activationId: activationId)
            return ConsoleActionMessage(done: "New activation data was mailed to \(email).")
        case .setRole:
            try await administration.setRole(request.role, email: email)
            return ConsoleActionMessage(done: "Role of \(email): \(request.role?.rawValue ?? "none").")
        case .delete:
            let devices = try await administration.deleteAccount(email: email)
            return ConsoleActionMessage(done: "Deleted \(email) with \(devices) device(s).")
        case .setOfflinePolicy:
            try await administration.setOfflinePolicy(
                graceMilliseconds: request.offlineGraceSeconds.map { $0 * 1000 },
                maxFailures: request.offlineMaxFailures,
                email: email)
            return ConsoleActionMessage(done: "Offline policy of \(email) set.")
        case .endCover:
            let ended = try await administration.endSessionCovers(
                email: email, coverId: try field(request.coverId, "coverId"))
            return ConsoleActionMessage(
                done: ended == 0
                    ? "That cover had ended already."
                    : "Ended the cover: the next sudo in that session asks for an approval.")
        case .invite, .addHost, .removeHost, .setSudoPolicy: preconditionFailure("not an account's action")
        }
    }

    /// The changes that concern no one account: an invitation, the hosts and their sudo policies.
    private func performFleetAction(
        _ request: ConsoleActionRequest, _ administration: Administration
    ) async throws -> ConsoleActionMessage {
        switch request.action {
        case .invite:
            let email = try field(request.email, "email")
            let pin = try await administration.createAccount(
                email: email, loginName: request.loginName.flatMap { $0.isEmpty ? nil : $0 })
            return ConsoleActionMessage(
                done:
                    "Invited \(email.lowercased()): the activation data is mailed. Its activation PIN is \(pin); hand it over by another channel than mail. It is not shown again."
            )
        case .addHost:
            let name = try field(request.hostName, "hostName")
            let token = try await administration.addHost(name: name, groups: request.hostGroups ?? [])
            return ConsoleActionMessage(
                done:
                    "Join token for \(name) (valid 60 min, once): \(token). On the host, run xign-setup host join --manager URL and paste it. It is not shown again."
            )
        case .removeHost:
            let name = try field(request.hostName, "hostName")
            try await administration.removeHost(name: name)
            return ConsoleActionMessage(done: "Removed the host \(name); its logins stop at once.")
        case .setSudoPolicy:
            let group = try field(request.hostGroup, "hostGroup")
            let service = request.service.flatMap { $0.isEmpty ? nil : $0 } ?? SudoPolicy.everyService
            try await administration.setSudoPolicy(request.sudoPolicy, service: service, hostGroup: group)
            return ConsoleActionMessage(
                done: Administration.sudoPolicySet(request.sudoPolicy, service: service, hostGroup: group))
        default: preconditionFailure("an account's action")
        }
    }

    private func field<T>(_ value: T?, _ name: String) throws -> T {
        guard let value else { throw ManagerError.badRequest("this change needs the field \(name)") }
        return value
    }
}

extension IdentityManager {
    /// An account as the console shows it, with its activations and host groups.
    struct ConsoleAccountDetail: Sendable {
        var account: ManagerStore.ConsoleAccount
        var activations: [ActivationSummary]
        var hostGroups: [String]
        var covers: [Administration.SessionCoverSummary]
    }

    func consoleAccounts(matching search: String, page: ListPage) async throws -> Page<ManagerStore.ConsoleAccount> {
        try await database.read { store in
            page.cut(
                try await store.consoleAccounts(matching: search, after: page.after, limit: page.limit + 1),
                key: \.email)
        }
    }

    func consoleAccountDetail(id: String) async throws -> ConsoleAccountDetail? {
        try await database.read { store in
            guard let account = try await store.consoleAccount(id: id) else { return nil }
            return ConsoleAccountDetail(
                account: account, activations: try await store.activationSummaries(email: account.email),
                hostGroups: try await store.hostGroups(accountId: id),
                covers: try await store.activeSessionCovers(accountId: id, now: Self.now()).map(\.summary))
        }
    }

    func pendingHostJoins() async throws -> [(name: String, expiresAt: Int64)] {
        try await database.read { store in try await store.pendingHostJoins(now: Self.now()) }
    }

    func waitingLogins(limit: Int) async throws -> [ManagerStore.WaitingLogin] {
        try await database.read { store in try await store.waitingLogins(now: Self.now(), limit: limit) }
    }

    func auditEvents(matching filter: AuditFilter, limit: Int) async throws -> [AuditEvent] {
        try await database.read { store in try await store.auditEvents(matching: filter, limit: limit) }
    }
}

extension IdentityManager {
    /// What the console's health page shows, as found now.
    struct ConsoleHealth: Sendable {
        /// The database's answer (how many administrators), or why it gave none.
        var database: Result<Int, any Error>
        /// When the TLS certificate runs out (milliseconds); nil without TLS. A certificate that cannot be read is
        /// `.failure`.
        var certificateNotValidAfter: Result<Int64, any Error>?
        var mailQueued: Int
        var mailOldest: Int64?
        var waiting: Int
        var failures: [AuditEvent]
    }

    func consoleHealth() async throws -> ConsoleHealth {
        let now = Self.now()
        var database: Result<Int, any Error>
        do {
            database = .success(try await self.database.read { store in try await store.accounts(withRole: .admin) })
        } catch { database = .failure(error) }
        let queued = try await mail.queued()
        return ConsoleHealth(
            database: database,
            certificateNotValidAfter: configuration.tls.map { tls in
                Result { try TLSCertificates.notValidAfter(tls) * 1000 }
            },
            mailQueued: queued.count, mailOldest: queued.map(\.queuedAt).min(),
            waiting: try await pendingConfirmationCount(),
            failures: try await auditEvents(
                matching: AuditFilter(kind: .loginFailure, since: now - 7 * 86_400_000, until: now + 1), limit: 20))
    }
}
