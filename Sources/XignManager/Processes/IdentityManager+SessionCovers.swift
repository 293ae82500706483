import Foundation
import XignCrypto
import XignProtocol

/// An approval covers its session (docs/design.md, "An approval covers its session"): a host opens a cover for the
/// audit session of an SSH login its user approved, asks at each sudo in that session whether the cover still holds,
/// and ends it when the session closes. The manager decides every time: the policy of the host's groups for the
/// service, the account's lock and host groups, the cover's end and expiry.
extension IdentityManager {
    /// How long after an approval's own expiry its login may still open a cover (the session opens right after it).
    static let coverOpeningSlackMilliseconds: Int64 = 60_000

    public func openSessionCover(body: Data, signature: String?) async throws -> String {
        let request = try RequestBody.decode(SessionCoverRequest.self, from: body, "the cover request")
        let raw = try RequestVerifier.signature(from: signature)
        let now = Self.now()
        let cover = try await database.transaction { store -> ManagerStore.SessionCoverRecord in
            let host = try await self.signingHost(
                id: request.hostId, signature: raw, path: APIPath.sessionCovers, body: body,
                challenge: request.challenge, in: store)
            guard let confirmation = try await store.confirmation(request.confirmationId),
                confirmation.hostId == host.id, confirmation.loginName == request.loginName,
                confirmation.state == .approved, now <= confirmation.expiresAt + Self.coverOpeningSlackMilliseconds
            else {
                throw ManagerError(
                    .conflict, .sessionInvalid,
                    "no login to \(request.loginName) on this host was approved just now under that approval; nothing is covered"
                )
            }
            guard try await !store.isConfirmationCovered(confirmation.id) else {
                throw ManagerError(.conflict, .sessionInvalid, "this approval covers a session already")
            }
            guard try await store.sudoPolicies(hostName: host.name).values.contains(.session) else {
                throw ManagerError(
                    .conflict, .sessionInvalid,
                    "no sudo policy of this host's groups is session; an administrator sets one with `xign-manager admin groups set-sudo`"
                )
            }
            guard try await !store.isAccountLocked(confirmation.accountId) else { throw ManagerError.accountLocked }
            let cover = ManagerStore.SessionCoverRecord(
                id: Base32.encode(try SecureRandom.bytes(16)), confirmationId: confirmation.id,
                accountId: confirmation.accountId, hostId: host.id, hostName: host.name,
                loginName: confirmation.loginName, auditSession: request.auditSession, createdAt: now,
                expiresAt: now + self.configuration.confirmation.sessionCoverMilliseconds)
            try await store.insertSessionCover(cover)
            try await store.recordAudit(
                AuditEvent(
                    .sessionCoverOpened, email: try await store.emails(ofAccount: cover.accountId).first,
                    host: host.name, service: confirmation.service,
                    detail: "approval \(confirmation.id) covers audit session \(cover.auditSession), cover \(cover.id)",
                    actor: "host \(host.id)"))
            return cover
        }
        logger.info(
            "session cover opened",
            metadata: ["cover": "\(cover.id)", "host": "\(cover.hostName)", "loginName": "\(cover.loginName)"])
        return try signer.sign(message(cover, nonce: request.nonce), type: SignedAnswerType.sessionCover)
    }

    /// A login by `service` in a covered session: passes while the cover holds, the service's policy on this host is
    /// `session` and the account may still log in here. Audited as the login it stands for.
    public func useSessionCover(body: Data, signature: String?) async throws -> String {
        let request = try RequestBody.decode(SessionCoverUseRequest.self, from: body, "the cover use")
        let raw = try RequestVerifier.signature(from: signature)
        let now = Self.now()
        let cover = try await database.transaction { store -> ManagerStore.SessionCoverRecord in
            let host = try await self.signingHost(
                id: request.hostId, signature: raw, path: APIPath.sessionCoverUse, body: body,
                challenge: request.challenge, in: store)
            guard let cover = try await store.sessionCover(id: request.coverId), cover.hostId == host.id,
                cover.loginName == request.loginName, cover.auditSession == request.auditSession
            else {
                throw ManagerError(.notFound, .sessionInvalid, "this session has no cover here; approve the login")
            }
            guard cover.isActive(at: now) else {
                throw ManagerError(
                    .conflict, .sessionInvalid,
                    "the session's cover \(cover.endedBecause.map { "was ended: \($0)" } ?? "ran out"); approve the login"
                )
            }
            guard SudoPolicy.of(request.service, in: try await store.sudoPolicies(hostName: host.name)) == .session
            else {
                throw ManagerError(
                    .conflict, .sessionInvalid, "\(request.service) on this host needs a fresh approval every time")
            }
            guard try await !store.isAccountLocked(cover.accountId) else { throw ManagerError.accountLocked }
            guard try await store.mayLogIn(accountId: cover.accountId, hostName: host.name) else {
                throw ManagerError(
                    .forbidden, .hostNotAllowed, "\(cover.loginName) may no longer log in to \(host.name)")
            }
            try await store.recordAudit(
                AuditEvent(
                    .login, email: try await store.emails(ofAccount: cover.accountId).first, host: host.name,
                    service: request.service,
                    detail: "\(request.service) in session of approval \(cover.confirmationId) (cover \(cover.id))",
                    actor: "host \(host.id)"))
            return cover
        }
        logger.info(
            "session cover used",
            metadata: ["cover": "\(cover.id)", "service": "\(request.service)", "loginName": "\(cover.loginName)"])
        return try signer.sign(message(cover, nonce: request.nonce), type: SignedAnswerType.sessionCover)
    }

    /// The session closed: its cover ends. Ending one that already ended or ran out is no error.
    public func endSessionCover(body: Data, signature: String?) async throws {
        let request = try RequestBody.decode(SessionCoverEndRequest.self, from: body, "the cover's end")
        let raw = try RequestVerifier.signature(from: signature)
        try await database.transaction { store in
            let host = try await self.signingHost(
                id: request.hostId, signature: raw, path: APIPath.sessionCoverEnd, body: body,
                challenge: request.challenge, in: store)
            guard let cover = try await store.sessionCover(id: request.coverId), cover.hostId == host.id else {
                throw ManagerError(.notFound, .notFound, "this host has no cover \(request.coverId)")
            }
            if try await !store.endSessionCovers(id: cover.id, at: Self.now(), because: "the session closed").isEmpty {
                try await store.recordAudit(
                    AuditEvent(
                        .sessionCoverEnded, email: try await store.emails(ofAccount: cover.accountId).first,
                        host: host.name, detail: "cover \(cover.id): the session closed", actor: "host \(host.id)"))
            }
        }
    }

    private func message(_ cover: ManagerStore.SessionCoverRecord, nonce: String) -> SessionCoverMessage {
        SessionCoverMessage(
            nonce: nonce, hostId: cover.hostId, coverId: cover.id, confirmationId: cover.confirmationId,
            loginName: cover.loginName, auditSession: cover.auditSession, expiresAt: cover.expiresAt)
    }
}
