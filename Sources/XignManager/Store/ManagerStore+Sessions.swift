import Foundation
import SQLKit
import XignProtocol

/// Personalization sessions and authentications: the short-lived state between one round trip and the next.
extension ManagerStore {
    // MARK: Personalization sessions

    struct PersonalizationSession: Sendable {
        var activationId: String
        var outcome: PersonalizationOutcome
        var challenge: String
        var expiresAt: Int64
    }

    func insertPersonalizationSession(
        _ session: SessionMessage, activationId: String, outcome: PersonalizationOutcome, mergeDeviceId: String?
    ) async throws {
        try await sql.raw(
            """
            INSERT INTO personalization_sessions (id, activation_id, outcome, challenge, expires_at, merge_device_id)
            VALUES (\(bind: session.id), \(bind: activationId), \(bind: outcome.rawValue), \(bind: session.challenge),
                    \(bind: session.expiresAt), \(bind: mergeDeviceId))
            """
        ).run()
    }

    func personalizationSession(_ id: String) async throws -> PersonalizationSession? {
        guard
            let row = try await sql.raw(
                """
                SELECT activation_id, outcome, challenge, expires_at FROM personalization_sessions WHERE id = \(bind: id)
                """
            ).first()
        else { return nil }
        return PersonalizationSession(
            activationId: try row.decode(column: "activation_id", as: String.self),
            outcome: try row.decode(enumColumn: "outcome", as: PersonalizationOutcome.self),
            challenge: try row.decode(column: "challenge", as: String.self),
            expiresAt: try row.decode(column: "expires_at", as: Int64.self)
        )
    }

    /// Deletes the session if it still has `challenge`; false when another request used it first.
    func consumePersonalizationSession(_ id: String, challenge: String) async throws -> Bool {
        try await sql.raw(
            """
            DELETE FROM personalization_sessions WHERE id = \(bind: id) AND challenge = \(bind: challenge) RETURNING id
            """
        ).first() != nil
    }

    /// A merge session that names `deviceId` as the one to confirm it, and has not run out.
    func isMergeSessionOpen(_ id: String, for deviceId: String, now: Int64) async throws -> Bool {
        try await sql.raw(
            """
            SELECT id FROM personalization_sessions WHERE id = \(bind: id) AND outcome = 'mergePersonalization'
            AND merge_device_id = \(bind: deviceId) AND expires_at > \(bind: now)
            """
        ).first() != nil
    }

    // MARK: Authentications

    struct NewAuthentication: Sendable {
        var id: String
        var deviceId: String
        var activationId: String
        var purpose: AuthenticationPurpose
        var host: String
        var localUser: String
        var challenge: String
        var expiresAt: Int64
    }

    /// An authentication waiting for its finish.
    struct PendingAuthentication: Sendable {
        var deviceId: String
        var activationId: String
        /// The account's address, for the audit.
        var email: String
        var purpose: AuthenticationPurpose
        var host: String
        var localUser: String
        var challenge: String
        /// The account's attributes, read with it (ManagerStore.accountAttributes).
        var accountAttributes: [String: String]
    }

    /// What a redeemed authorization code stood for.
    struct CodeGrant: Sendable {
        var deviceId: String
        var purpose: AuthenticationPurpose
        var role: String
        var host: String
        var localUser: String
        /// Canonical JSON of the attribute values given at finish.
        var attributes: String?
    }

    func insertAuthentication(_ authentication: NewAuthentication) async throws {
        try await sql.raw(
            """
            INSERT INTO authentications (id, device_id, activation_id, purpose, host, local_user, challenge, expires_at)
            VALUES (\(bind: authentication.id), \(bind: authentication.deviceId), \(bind: authentication.activationId),
                    \(bind: try Self.column(authentication.purpose)), \(bind: authentication.host), \(bind: authentication.localUser),
                    \(bind: authentication.challenge), \(bind: authentication.expiresAt))
            """
        ).run()
    }

    func pendingAuthentication(_ id: String, now: Int64) async throws -> PendingAuthentication? {
        guard
            let row = try await sql.raw(
                """
                SELECT au.device_id, au.activation_id, c.email, c.login_name, c.attributes, au.purpose, au.host,
                       au.local_user, au.challenge
                FROM authentications au JOIN activations a ON a.id = au.activation_id JOIN accounts c ON c.id = a.account_id
                WHERE au.id = \(bind: id) AND au.challenge IS NOT NULL AND au.expires_at > \(bind: now)
                """
            ).first()
        else { return nil }
        return PendingAuthentication(
            deviceId: try row.decode(column: "device_id", as: String.self),
            activationId: try row.decode(column: "activation_id", as: String.self),
            email: try row.decode(column: "email", as: String.self), purpose: try Self.purpose(row),
            host: try row.decode(column: "host", as: String.self),
            localUser: try row.decode(column: "local_user", as: String.self),
            challenge: try row.decode(column: "challenge", as: String.self),
            accountAttributes: try Self.accountAttributes(in: row)
        )
    }

    /// Uses up the authentication's challenge; false when another request used it first.
    func consumeAuthenticationChallenge(_ id: String, challenge: String) async throws -> Bool {
        try await sql.raw(
            """
            UPDATE authentications SET challenge = NULL WHERE id = \(bind: id) AND challenge = \(bind: challenge) RETURNING id
            """
        ).first() != nil
    }

    /// After a lockout: the challenge the next attempt signs, valid until `expiresAt`.
    func renewAuthenticationChallenge(_ id: String, challenge: String, expiresAt: Int64) async throws {
        try await sql.raw(
            """
            UPDATE authentications SET challenge = \(bind: challenge), expires_at = \(bind: expiresAt) WHERE id = \(bind: id)
            """
        ).run()
    }

    func recordServiceLogin(
        _ id: String, role: String, code: String?, codeExpiresAt: Int64, attributes: String
    ) async throws {
        try await sql.raw(
            """
            UPDATE authentications SET role = \(bind: role), code = \(bind: code), code_expires_at = \(bind: codeExpiresAt),
                   attributes = \(bind: attributes) WHERE id = \(bind: id)
            """
        ).run()
    }

    /// Uses up an authorization code; nil when it is unknown, expired or used.
    func redeemAuthorizationCode(_ code: String, now: Int64) async throws -> CodeGrant? {
        try await sql.raw(
            """
            UPDATE authentications SET code = NULL
            WHERE code = \(bind: code) AND code_expires_at > \(bind: now)
            RETURNING device_id, purpose, role, host, local_user, attributes
            """
        ).first().map(Self.codeGrant)
    }

    /// What an unused, unexpired code stands for, without using it up.
    func authorizationCode(_ code: String, now: Int64) async throws -> CodeGrant? {
        try await sql.raw(
            """
            SELECT device_id, purpose, role, host, local_user, attributes FROM authentications
            WHERE code = \(bind: code) AND code_expires_at > \(bind: now)
            """
        ).first().map(Self.codeGrant)
    }

    private static func codeGrant(_ row: any SQLRow) throws -> CodeGrant {
        CodeGrant(
            deviceId: try row.decode(column: "device_id", as: String.self), purpose: try purpose(row),
            role: try row.decode(column: "role", as: String.self),
            host: try row.decode(column: "host", as: String.self),
            localUser: try row.decode(column: "local_user", as: String.self),
            attributes: try row.decode(column: "attributes", as: String?.self)
        )
    }

    /// The purpose column holds the purpose as the wire has it (canonical JSON): one form, decoded here at the row.
    static func column(_ purpose: AuthenticationPurpose) throws -> String {
        String(decoding: try JSONEncoder.canonical.encode(purpose), as: UTF8.self)
    }

    private static func purpose(_ row: any SQLRow) throws -> AuthenticationPurpose {
        let text = try row.decode(column: "purpose", as: String.self)
        guard let purpose = try? JSONDecoder().decode(AuthenticationPurpose.self, from: Data(text.utf8)) else {
            throw ManagerError.internalFailure(
                "an authentication row holds the purpose '\(text.prefix(64))', which this manager does not know")
        }
        return purpose
    }

    /// The two kinds of browser session, each in its own table: the account page's, which only reads, and the
    /// console's, which an administrator opens with passkey and PIN.
    enum WebSessionKind: String, Sendable {
        case account = "web_sessions"
        case console = "console_sessions"
    }

    /// A browser's session, kept as the hash of its token.
    func insertWebSession(_ kind: WebSessionKind, tokenHash: String, deviceId: String, expiresAt: Int64) async throws {
        let table = SQLQueryString(kind.rawValue)
        try await sql.raw(
            "INSERT INTO \(table) (token_hash, device_id, expires_at) VALUES (\(bind: tokenHash), \(bind: deviceId), \(bind: expiresAt))"
        ).run()
    }

    /// The device of a session that has not run out, while the device still holds its activation.
    func webSessionDevice(_ kind: WebSessionKind, tokenHash: String, now: Int64) async throws -> String? {
        let table = SQLQueryString(kind.rawValue)
        return try await sql.raw(
            """
            SELECT s.device_id FROM \(table) s JOIN devices d ON d.id = s.device_id AND d.revoked = 0
            JOIN activations a ON a.id = d.activation_id AND a.device_id = d.id AND a.state = 'personalized'
            WHERE s.token_hash = \(bind: tokenHash) AND s.expires_at > \(bind: now)
            """
        ).first()?.decode(column: "device_id", as: String.self)
    }

    func deleteWebSession(_ kind: WebSessionKind, tokenHash: String) async throws {
        let table = SQLQueryString(kind.rawValue)
        try await sql.raw("DELETE FROM \(table) WHERE token_hash = \(bind: tokenHash)").run()
    }
}
