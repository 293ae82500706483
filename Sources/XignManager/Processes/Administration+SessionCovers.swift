import Foundation
import XignProtocol

/// The administrator's side of session covers: each host group's sudo policy, and the covers that hold now.
extension Administration {
    /// A cover as the console and `admin accounts covers` show it.
    public struct SessionCoverSummary: Codable, Sendable {
        public var id: String
        public var host: String
        public var loginName: String
        public var approval: String
        public var auditSession: Int64
        public var openedAt: Int64
        public var expiresAt: Int64
    }

    /// What a sudo by `service` (`*`: every service the group names no policy for) needs on `hostGroup`'s hosts; nil
    /// removes the group's line, which leaves the service to the host's other groups (fresh where none says).
    public func setSudoPolicy(_ policy: SudoPolicy?, service: String, hostGroup: String) async throws {
        guard hostGroup == IdentityManager.everyHost || HostNameValidator.isValid(hostGroup),
            hostGroup.utf8.count <= WireLimit.identifier
        else {
            throw ManagerError.badRequest("'\(hostGroup.prefix(64))' is not a host group name (or * for every host)")
        }
        // A PAM service is a file in /etc/pam.d.
        let serviceCharacters = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
        guard
            service == SudoPolicy.everyService
                || ((1...64).contains(service.count) && service.allSatisfy(serviceCharacters.contains)
                    && service.first != ".")
        else {
            throw ManagerError.badRequest(
                "'\(service.prefix(64))' is not a PAM service name (sudo, su, ...) or * for every service")
        }
        try await manager.database.transaction { store in
            // A host's table names every service any of its groups names: bounded over all groups, so that no host's
            // directory outgrows what hosts read.
            let named = Set(try await store.sudoPolicies().values.flatMap(\.keys))
            if policy != nil, !named.contains(service), named.count >= WireLimit.sudoPolicies {
                throw ManagerError.badRequest(
                    "sudo policies name at most \(WireLimit.sudoPolicies) PAM services in all; remove one first")
            }
            try await store.setSudoPolicy(policy, service: service, hostGroup: hostGroup)
            try await store.recordAudit(
                self.adminEvent(.sudoPolicySet, detail: "\(hostGroup) \(service): \(policy?.rawValue ?? "removed")"))
        }
        manager.logger.notice(
            "sudo policy set",
            metadata: ["hostGroup": "\(hostGroup)", "service": "\(service)", "policy": "\(policy?.rawValue ?? "-")"])
    }

    /// What `setSudoPolicy` did, in a sentence for the administrator.
    public static func sudoPolicySet(_ policy: SudoPolicy?, service: String, hostGroup: String) -> String {
        let line =
            policy.map { "\(service) on the hosts of \(hostGroup): \($0.rawValue)." }
            ?? "\(hostGroup) says nothing about \(service) now."
        return line + " A cover in use obeys it at once; hosts read it at their next directory refresh."
    }

    /// Every host group's sudo policies, by host group and PAM service.
    public func sudoPolicies() async throws -> [String: [String: SudoPolicy]] {
        try await manager.database.read { store in try await store.sudoPolicies() }
    }

    /// The covers of the account that hold now, newest first.
    public func sessionCovers(email: String) async throws -> [SessionCoverSummary] {
        try await manager.database.read { store in
            guard let account = try await store.consoleAccount(email: email) else {
                throw ManagerError(
                    .notFound, .notFound, "no account \(email.prefix(254)); `xign-manager admin accounts` lists them")
            }
            return try await store.activeSessionCovers(accountId: account.id, now: IdentityManager.now()).map(
                \.summary)
        }
    }

    /// Ends a cover of the account (`coverId`), or all of them: the next sudo in those sessions asks for an approval.
    /// Returns how many ended.
    @discardableResult
    public func endSessionCovers(email: String, coverId: String? = nil) async throws -> Int {
        let ended = try await manager.database.transaction { store -> [String] in
            let account = try await self.target(email, for: .other, in: store)
            if let coverId {
                guard let cover = try await store.sessionCover(id: coverId), cover.accountId == account.id else {
                    throw ManagerError(.notFound, .notFound, "\(email) has no cover \(coverId.prefix(64))")
                }
            }
            let ended = try await store.endSessionCovers(
                id: coverId, accountId: account.id, at: IdentityManager.now(),
                because: "\(self.administrator) ended it")
            for id in ended {
                try await store.recordAudit(
                    self.adminEvent(.sessionCoverEnded, email: email.lowercased(), detail: "cover \(id)"))
            }
            return ended
        }
        manager.logger.notice("session covers ended", metadata: ["email": "\(email)", "count": "\(ended.count)"])
        return ended.count
    }
}

extension ManagerStore.SessionCoverRecord {
    var summary: Administration.SessionCoverSummary {
        Administration.SessionCoverSummary(
            id: id, host: hostName, loginName: loginName, approval: confirmationId, auditSession: auditSession,
            openedAt: createdAt, expiresAt: expiresAt)
    }
}
