import SQLKit
import XignCrypto
import XignProtocol

/// Hosts: servers that ask for login confirmations, with their one-time join tokens.
extension ManagerStore {
    struct HostRecord: Sendable {
        var id: String
        var name: String
        var publicKey: P256PublicKey
        var keyKind: KeyKind
        var createdAt: Int64
        /// The issuer of the EK certificate the key was attested with, or nil.
        var ekIssuer: String? = nil
        /// Why the key is not attested.
        var unattestedBecause: String? = nil
    }

    /// A join token for `name`, stored as its hash; a token for the same name issued before is void.
    func insertHostJoinToken(hash: String, name: String, expiresAt: Int64) async throws {
        try await sql.raw("DELETE FROM host_join_tokens WHERE name = \(bind: name)").run()
        try await sql.raw(
            "INSERT INTO host_join_tokens (token_hash, name, expires_at) VALUES (\(bind: hash), \(bind: name), \(bind: expiresAt))"
        )
        .run()
    }

    /// Uses up a join token; returns the host name it was issued for, or nil when it is unknown, used or expired.
    func consumeHostJoinToken(hash: String, now: Int64) async throws -> String? {
        try await sql.raw(
            """
            DELETE FROM host_join_tokens WHERE token_hash = \(bind: hash) AND expires_at > \(bind: now) RETURNING name
            """
        ).first()?.decode(column: "name", as: String.self)
    }

    /// The hosts a join token waits for, with when it runs out.
    func pendingHostJoins(now: Int64) async throws -> [(name: String, expiresAt: Int64)] {
        try await sql.raw(
            "SELECT name, expires_at FROM host_join_tokens WHERE expires_at > \(bind: now) ORDER BY name"
        ).all().map {
            (try $0.decode(column: "name", as: String.self), try $0.decode(column: "expires_at", as: Int64.self))
        }
    }

    /// Whether a join token is there and unexpired, without using it up.
    func isHostJoinTokenValid(hash: String, now: Int64) async throws -> Bool {
        try await sql.raw(
            "SELECT name FROM host_join_tokens WHERE token_hash = \(bind: hash) AND expires_at > \(bind: now)"
        ).first() != nil
    }

    func insertHost(
        id: String, name: String, publicKey: String, keyKind: KeyKind, ekIssuer: String?, unattestedBecause: String?,
        createdAt: Int64
    ) async throws {
        try await sql.raw(
            """
            INSERT INTO hosts (id, name, public_key, key_kind, ek_issuer, unattested_because, created_at)
            VALUES (\(bind: id), \(bind: name), \(bind: publicKey), \(bind: keyKind.rawValue), \(bind: ekIssuer), \(bind: unattestedBecause),
                    \(bind: createdAt))
            """
        ).run()
    }

    func host(id: String) async throws -> HostRecord? {
        try await sql.raw(
            "SELECT id, name, public_key, key_kind, created_at, ek_issuer, unattested_because FROM hosts WHERE id = \(bind: id)"
        )
        .first().map(Self.hostRecord)
    }

    /// One page of the hosts in name order (`limit + 1` of them, so the caller sees whether more follow).
    func hosts(after: String, limit: Int) async throws -> [HostRecord] {
        try await sql.raw(
            """
            SELECT id, name, public_key, key_kind, created_at, ek_issuer, unattested_because FROM hosts
            WHERE name > \(bind: after) ORDER BY name LIMIT \(bind: limit + 1)
            """
        ).all().map(Self.hostRecord)
    }

    /// The groups of the hosts named after `after` up to `last`, by host name: a page's groups in one statement.
    func groups(ofHostsAfter after: String, through last: String) async throws -> [String: [String]] {
        var groups: [String: [String]] = [:]
        for row in try await sql.raw(
            """
            SELECT host_name, group_name FROM host_groups WHERE host_name > \(bind: after) AND host_name <= \(bind: last)
            ORDER BY host_name, group_name
            """
        ).all() {
            groups[try row.decode(column: "host_name", as: String.self), default: []].append(
                try row.decode(column: "group_name", as: String.self))
        }
        return groups
    }

    /// Removes the host, its pending join token and its groups; false when neither host nor token existed.
    func removeHost(name: String) async throws -> Bool {
        let host = try await sql.raw("DELETE FROM hosts WHERE name = \(bind: name) RETURNING id").first()
        let token = try await sql.raw("DELETE FROM host_join_tokens WHERE name = \(bind: name) RETURNING name").first()
        try await setGroups([], hostName: name)
        return host != nil || token != nil
    }

    func setGroups(_ groups: [String], hostName: String) async throws {
        try await sql.raw("DELETE FROM host_groups WHERE host_name = \(bind: hostName)").run()
        for group in Set(groups) {
            try await sql.raw(
                "INSERT INTO host_groups (host_name, group_name) VALUES (\(bind: hostName), \(bind: group))"
            ).run()
        }
    }

    func groups(hostName: String) async throws -> [String] {
        try await sql.raw("SELECT group_name FROM host_groups WHERE host_name = \(bind: hostName) ORDER BY group_name")
            .all()
            .map { try $0.decode(column: "group_name", as: String.self) }
    }

    func setHostGroups(_ groups: [String], accountId: String) async throws {
        try await sql.raw("DELETE FROM account_host_groups WHERE account_id = \(bind: accountId)").run()
        for group in Set(groups) {
            try await sql.raw(
                "INSERT INTO account_host_groups (account_id, group_name) VALUES (\(bind: accountId), \(bind: group))"
            ).run()
        }
    }

    func hostGroups(accountId: String) async throws -> [String] {
        try await sql.raw(
            "SELECT group_name FROM account_host_groups WHERE account_id = \(bind: accountId) ORDER BY group_name"
        ).all()
            .map { try $0.decode(column: "group_name", as: String.self) }
    }

    /// An account may log in to hosts that share one of its groups, to every host with `*`, and to none without groups.
    func mayLogIn(accountId: String, hostName: String) async throws -> Bool {
        let allowed = try await hostGroups(accountId: accountId)
        if allowed.contains(IdentityManager.everyHost) { return true }
        return !Set(allowed).isDisjoint(with: try await groups(hostName: hostName))
    }

    /// Accounts with a login name and no host groups: before host access was explicit, these could log in everywhere.
    func accountsWithoutHostGroups() async throws -> [(id: String, email: String)] {
        try await sql.raw(
            """
            SELECT c.id, c.email FROM accounts c
            WHERE c.login_name IS NOT NULL AND NOT EXISTS (SELECT 1 FROM account_host_groups g WHERE g.account_id = c.id)
            ORDER BY c.email
            """
        ).all().map { (try $0.decode(column: "id", as: String.self), try $0.decode(column: "email", as: String.self)) }
    }

    func isHostNameTaken(_ name: String) async throws -> Bool {
        try await sql.raw("SELECT id FROM hosts WHERE name = \(bind: name)").first() != nil
    }

    private static func hostRecord(_ row: any SQLRow) throws -> HostRecord {
        let id = try row.decode(column: "id", as: String.self)
        guard let key = StoredPublicKeys.shared.key(try row.decode(column: "public_key", as: String.self)) else {
            throw ManagerError.internalFailure("stored key of host \(id) is corrupt")
        }
        return HostRecord(
            id: id, name: try row.decode(column: "name", as: String.self), publicKey: key,
            keyKind: try row.decode(enumColumn: "key_kind", as: KeyKind.self),
            createdAt: try row.decode(column: "created_at", as: Int64.self),
            ekIssuer: try row.decode(column: "ek_issuer", as: String?.self),
            unattestedBecause: try row.decode(column: "unattested_because", as: String?.self)
        )
    }
}
