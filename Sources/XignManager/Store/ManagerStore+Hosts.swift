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
    }

    /// A join token for `name`, stored as its hash; a token for the same name issued before is void.
    func insertHostJoinToken(hash: String, name: String, expiresAt: Int64) async throws {
        try await sql.raw("DELETE FROM host_join_tokens WHERE name = \(bind: name)").run()
        try await sql.raw("INSERT INTO host_join_tokens (token_hash, name, expires_at) VALUES (\(bind: hash), \(bind: name), \(bind: expiresAt))").run()
    }

    /// Uses up a join token; returns the host name it was issued for, or nil when it is unknown, used or expired.
    func consumeHostJoinToken(hash: String, now: Int64) async throws -> String? {
        try await sql.raw("""
            DELETE FROM host_join_tokens WHERE token_hash = \(bind: hash) AND expires_at > \(bind: now) RETURNING name
            """).first()?.decode(column: "name", as: String.self)
    }

    func insertHost(id: String, name: String, publicKey: String, keyKind: KeyKind, createdAt: Int64) async throws {
        try await sql.raw("""
            INSERT INTO hosts (id, name, public_key, key_kind, created_at)
            VALUES (\(bind: id), \(bind: name), \(bind: publicKey), \(bind: keyKind.rawValue), \(bind: createdAt))
            """).run()
    }

    func host(id: String) async throws -> HostRecord? {
        try await sql.raw("SELECT id, name, public_key, key_kind, created_at FROM hosts WHERE id = \(bind: id)").first().map(Self.hostRecord)
    }

    func hosts() async throws -> [HostRecord] {
        try await sql.raw("SELECT id, name, public_key, key_kind, created_at FROM hosts ORDER BY name").all().map(Self.hostRecord)
    }

    /// Removes the host and its pending join token; false when neither existed.
    func removeHost(name: String) async throws -> Bool {
        let host = try await sql.raw("DELETE FROM hosts WHERE name = \(bind: name) RETURNING id").first()
        let token = try await sql.raw("DELETE FROM host_join_tokens WHERE name = \(bind: name) RETURNING name").first()
        return host != nil || token != nil
    }

    func isHostNameTaken(_ name: String) async throws -> Bool {
        try await sql.raw("SELECT id FROM hosts WHERE name = \(bind: name)").first() != nil
    }

    private static func hostRecord(_ row: any SQLRow) throws -> HostRecord {
        let id = try row.decode(column: "id", as: String.self)
        guard let keyBytes = Base64URL.decode(try row.decode(column: "public_key", as: String.self)),
              let key = try? P256PublicKey(derRepresentation: keyBytes) else {
            throw ManagerError.internalFailure("stored key of host \(id) is corrupt")
        }
        return HostRecord(
            id: id, name: try row.decode(column: "name", as: String.self), publicKey: key,
            keyKind: KeyKind(rawValue: try row.decode(column: "key_kind", as: String.self)) ?? .software,
            createdAt: try row.decode(column: "created_at", as: Int64.self)
        )
    }
}
