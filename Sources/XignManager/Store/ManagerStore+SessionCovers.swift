import SQLKit
import XignProtocol

/// Session covers: each host group's sudo policy, and the covers approved logins opened.
extension ManagerStore {
    struct SessionCoverRecord: Sendable, Equatable {
        var id: String
        var confirmationId: String
        var accountId: String
        var hostId: String
        var hostName: String
        var loginName: String
        var auditSession: Int64
        var createdAt: Int64
        var expiresAt: Int64
        var endedAt: Int64?
        var endedBecause: String?

        func isActive(at now: Int64) -> Bool { endedAt == nil && expiresAt > now }
    }

    /// Sets what a sudo by `service` (`*`: every service not named) needs on `hostGroup`'s hosts; nil removes the line.
    func setSudoPolicy(_ policy: SudoPolicy?, service: String, hostGroup: String) async throws {
        try await sql.raw(
            "DELETE FROM host_group_sudo_policies WHERE group_name = \(bind: hostGroup) AND service = \(bind: service)"
        ).run()
        guard let policy else { return }
        try await sql.raw(
            """
            INSERT INTO host_group_sudo_policies (group_name, service, policy)
            VALUES (\(bind: hostGroup), \(bind: service), \(bind: policy.rawValue))
            """
        ).run()
    }

    /// Every host group's policies, by host group and service.
    func sudoPolicies() async throws -> [String: [String: SudoPolicy]] {
        var policies: [String: [String: SudoPolicy]] = [:]
        for row in try await sql.raw(
            "SELECT group_name, service, policy FROM host_group_sudo_policies ORDER BY group_name, service"
        ).all() {
            policies[try row.decode(column: "group_name", as: String.self), default: [:]][
                try row.decode(column: "service", as: String.self)] =
                SudoPolicy(rawValue: try row.decode(column: "policy", as: String.self)) ?? .fresh
        }
        return policies
    }

    /// The policies of `hostName`, by service: where its groups (and `*`, every host) disagree, the strictest line for
    /// the service wins, a group's `*` line standing in for a service it does not name; a group with neither has no say.
    func sudoPolicies(hostName: String) async throws -> [String: SudoPolicy] {
        let groups = Set(try await groups(hostName: hostName) + [IdentityManager.everyHost])
        let tables = try await sudoPolicies().filter { groups.contains($0.key) }.map(\.value)
        return Dictionary(
            uniqueKeysWithValues: Set(tables.flatMap(\.keys)).map { service in
                (service, tables.compactMap { $0[service] ?? $0[SudoPolicy.everyService] }.max() ?? .fresh)
            })
    }

    func insertSessionCover(_ cover: SessionCoverRecord) async throws {
        try await sql.raw(
            """
            INSERT INTO session_covers (id, confirmation_id, account_id, host_id, login_name, audit_session, created_at, expires_at)
            VALUES (\(bind: cover.id), \(bind: cover.confirmationId), \(bind: cover.accountId), \(bind: cover.hostId),
                \(bind: cover.loginName), \(bind: cover.auditSession), \(bind: cover.createdAt), \(bind: cover.expiresAt))
            """
        ).run()
    }

    func isConfirmationCovered(_ confirmationId: String) async throws -> Bool {
        try await sql.raw("SELECT id FROM session_covers WHERE confirmation_id = \(bind: confirmationId)").first()
            != nil
    }

    func sessionCover(id: String) async throws -> SessionCoverRecord? {
        try await sql.raw("\(unsafeRaw: Self.coverSelect) WHERE s.id = \(bind: id)").first().map(Self.coverRecord)
    }

    /// The account's covers that hold now, newest first.
    func activeSessionCovers(accountId: String, now: Int64) async throws -> [SessionCoverRecord] {
        try await sql.raw(
            """
            \(unsafeRaw: Self.coverSelect)
            WHERE s.account_id = \(bind: accountId) AND s.ended_at IS NULL AND s.expires_at > \(bind: now)
            ORDER BY s.created_at DESC
            """
        ).all().map(Self.coverRecord)
    }

    /// Ends one cover (`id`) or every cover of an account that holds now; returns the ids it ended.
    @discardableResult
    func endSessionCovers(
        id: String? = nil, accountId: String? = nil, at now: Int64, because reason: String
    ) async throws -> [String] {
        let which: SQLQueryString =
            if let id { "id = \(bind: id)" } else { "account_id = \(bind: accountId ?? "")" }
        return try await sql.raw(
            """
            UPDATE session_covers SET ended_at = \(bind: now), ended_because = \(bind: reason)
            WHERE \(which) AND ended_at IS NULL AND expires_at > \(bind: now) RETURNING id
            """
        ).all().map { try $0.decode(column: "id", as: String.self) }
    }

    private static let coverSelect = """
        SELECT s.id, s.confirmation_id, s.account_id, s.host_id, h.name AS host_name, s.login_name, s.audit_session,
        s.created_at, s.expires_at, s.ended_at, s.ended_because
        FROM session_covers s JOIN hosts h ON h.id = s.host_id
        """

    private static func coverRecord(_ row: any SQLRow) throws -> SessionCoverRecord {
        SessionCoverRecord(
            id: try row.decode(column: "id", as: String.self),
            confirmationId: try row.decode(column: "confirmation_id", as: String.self),
            accountId: try row.decode(column: "account_id", as: String.self),
            hostId: try row.decode(column: "host_id", as: String.self),
            hostName: try row.decode(column: "host_name", as: String.self),
            loginName: try row.decode(column: "login_name", as: String.self),
            auditSession: try row.decode(column: "audit_session", as: Int64.self),
            createdAt: try row.decode(column: "created_at", as: Int64.self),
            expiresAt: try row.decode(column: "expires_at", as: Int64.self),
            endedAt: try row.decode(column: "ended_at", as: Int64?.self),
            endedBecause: try row.decode(column: "ended_because", as: String?.self))
    }
}
