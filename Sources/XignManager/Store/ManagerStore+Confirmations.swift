import SQLKit
import XignProtocol

/// Login confirmations: what a host asked, for which account, and what became of it.
extension ManagerStore {
    struct ConfirmationRecord: Sendable {
        var id: String
        var hostId: String
        var hostName: String
        var accountId: String
        var loginName: String
        var service: String
        var remoteHost: String?
        /// The host and the remote address it reported (`AddressKey`): what the pending cap and the cool-down count by.
        var source: String
        var tty: String?
        var command: String?
        var nonce: String
        var waitTokenHash: String
        var code: String
        var codeFailures: Int
        var state: ConfirmationState
        var approvedBy: String?
        var createdAt: Int64
        var expiresAt: Int64
        /// When a device first began to approve or deny it; nil while nobody has.
        var openedAt: Int64?

        /// As an approving device lists it: without the code.
        var pendingMessage: PendingConfirmationMessage {
            PendingConfirmationMessage(
                confirmationId: id, host: hostName, service: service, loginName: loginName, remoteHost: remoteHost,
                tty: tty, command: command,
                createdAt: createdAt, expiresAt: expiresAt)
        }

        /// The state as of `now`: a pending confirmation past its expiry has expired.
        func state(at now: Int64) -> ConfirmationState { state == .pending && expiresAt <= now ? .expired : state }
    }

    /// The account a host's login name belongs to.
    /// The account a host's login name names: its uid, and whether it may be the hosts' local user of that name.
    struct LoginAccount: Sendable {
        var id: String
        var uid: Int64?
        var mapsLocalUser: Bool
    }

    func loginAccount(loginName: String) async throws -> LoginAccount? {
        try await sql.raw("SELECT id, uid, maps_local_user FROM accounts WHERE login_name = \(bind: loginName)").first()
            .map {
                LoginAccount(
                    id: try $0.decode(column: "id", as: String.self),
                    uid: try $0.decode(column: "uid", as: Int64?.self),
                    mapsLocalUser: try $0.decode(column: "maps_local_user", as: Int.self) != 0)
            }
    }

    /// Until when `source` may not start confirmations for the account (a denial's cool-down); 0 when it may.
    func confirmationsBlockedUntil(accountId: String, source: String) async throws -> Int64 {
        try await sql.raw(
            """
            SELECT blocked_until FROM confirmation_cooldowns WHERE account_id = \(bind: accountId) AND source = \(bind: source)
            """
        ).first()?.decode(column: "blocked_until", as: Int64.self) ?? 0
    }

    func blockConfirmations(accountId: String, source: String, until: Int64) async throws {
        try await sql.raw(
            """
            INSERT INTO confirmation_cooldowns (account_id, source, blocked_until) VALUES (\(bind: accountId), \(bind: source), \(bind: until))
            ON CONFLICT (account_id, source) DO UPDATE SET blocked_until = excluded.blocked_until
            """
        ).run()
    }

    /// Records that a device began to approve or deny the confirmation (the first time only).
    func markOpened(_ id: String, now: Int64) async throws {
        try await sql.raw(
            "UPDATE confirmations SET opened_at = \(bind: now) WHERE id = \(bind: id) AND opened_at IS NULL"
        ).run()
    }

    /// Pending confirmations of all accounts (the /metrics gauge).
    func pendingConfirmationCount(now: Int64) async throws -> Int {
        try await sql.raw(
            "SELECT COUNT(*) AS n FROM confirmations WHERE state = 'pending' AND expires_at > \(bind: now)"
        )
        .first()?.decode(column: "n", as: Int.self) ?? 0
    }

    /// Stores a new confirmation; its state, code failures and approver start out empty whatever `confirmation` says.
    func insertConfirmation(_ confirmation: ConfirmationRecord) async throws {
        try await sql.raw(
            """
            INSERT INTO confirmations (id, host_id, account_id, login_name, service, remote_host, source, tty, command, nonce, wait_token_hash,
                                       code, code_failures, state, created_at, expires_at, changed_at)
            VALUES (\(bind: confirmation.id), \(bind: confirmation.hostId), \(bind: confirmation.accountId), \(bind: confirmation.loginName),
                    \(bind: confirmation.service), \(bind: confirmation.remoteHost), \(bind: confirmation.source), \(bind: confirmation.tty),
                    \(bind: confirmation.command),
                    \(bind: confirmation.nonce), \(bind: confirmation.waitTokenHash), \(bind: confirmation.code), 0, 'pending',
                    \(bind: confirmation.createdAt), \(bind: confirmation.expiresAt), \(bind: confirmation.createdAt))
            """
        ).run()
    }

    func confirmation(_ id: String) async throws -> ConfirmationRecord? {
        try await sql.raw(
            """
            \(unsafeRaw: Self.confirmationSelect) WHERE c.id = \(bind: id)
            """
        ).first().map(Self.confirmationRecord)
    }

    /// The confirmations waiting for `accountId`, oldest first.
    func pendingConfirmations(accountId: String, now: Int64) async throws -> [ConfirmationRecord] {
        try await sql.raw(
            """
            \(unsafeRaw: Self.confirmationSelect)
            WHERE c.account_id = \(bind: accountId) AND c.state = 'pending' AND c.expires_at > \(bind: now) ORDER BY c.created_at
            """
        ).all().map(Self.confirmationRecord)
    }

    /// Counts a wrong code; returns the failures so far.
    func recordWrongConfirmationCode(_ id: String) async throws -> Int {
        try await sql.raw(
            """
            UPDATE confirmations SET code_failures = code_failures + 1 WHERE id = \(bind: id) RETURNING code_failures
            """
        ).first()?.decode(column: "code_failures", as: Int.self) ?? 0
    }

    /// Decides a pending confirmation; false when it was decided (or ran out) before.
    func decideConfirmation(
        _ id: String, state: ConfirmationState, approvedBy: String?, now: Int64
    ) async throws -> Bool {
        try await sql.raw(
            """
            UPDATE confirmations SET state = \(bind: state.rawValue), approved_by = \(bind: approvedBy), changed_at = \(bind: now)
            WHERE id = \(bind: id) AND state = 'pending' AND expires_at > \(bind: now) RETURNING id
            """
        ).first() != nil
    }

    /// The account an activation belongs to, for matching an approving device to a confirmation.
    func accountId(ofDevice deviceId: String) async throws -> String? {
        try await sql.raw(
            """
            SELECT a.account_id FROM devices d JOIN activations a ON a.id = d.activation_id WHERE d.id = \(bind: deviceId) AND d.revoked = 0
            """
        ).first()?.decode(column: "account_id", as: String.self)
    }

    // MARK: Host challenges

    /// Stores a challenge for `hostId`; the expiry service deletes it once it ran out.
    func insertHostChallenge(_ challenge: ChallengeMessage, hostId: String) async throws {
        try await sql.raw(
            """
            INSERT INTO host_challenges (challenge, host_id, expires_at) VALUES (\(bind: challenge.challenge), \(bind: hostId), \(bind: challenge.expiresAt))
            """
        ).run()
    }

    /// Uses up a host's challenge; false when it is unknown, expired or used.
    func consumeHostChallenge(_ challenge: String, hostId: String, now: Int64) async throws -> Bool {
        try await sql.raw(
            """
            DELETE FROM host_challenges WHERE challenge = \(bind: challenge) AND host_id = \(bind: hostId) AND expires_at > \(bind: now) RETURNING host_id
            """
        ).first() != nil
    }

    /// The columns are named, never `c.*`: PostgreSQL refuses a prepared statement whose result changed, as it would when
    /// another instance's migration adds a column.
    private static let confirmationSelect = """
        SELECT c.id, c.host_id, h.name AS host_name, c.account_id, c.login_name, c.service, c.remote_host, c.source, c.tty, c.command,
        c.nonce, c.wait_token_hash, c.code, c.code_failures, c.state, c.approved_by, c.created_at, c.expires_at, c.opened_at
        FROM confirmations c JOIN hosts h ON h.id = c.host_id
        """

    private static func confirmationRecord(_ row: any SQLRow) throws -> ConfirmationRecord {
        ConfirmationRecord(
            id: try row.decode(column: "id", as: String.self),
            hostId: try row.decode(column: "host_id", as: String.self),
            hostName: try row.decode(column: "host_name", as: String.self),
            accountId: try row.decode(column: "account_id", as: String.self),
            loginName: try row.decode(column: "login_name", as: String.self),
            service: try row.decode(column: "service", as: String.self),
            remoteHost: try row.decode(column: "remote_host", as: String?.self),
            source: try row.decode(column: "source", as: String.self),
            tty: try row.decode(column: "tty", as: String?.self),
            command: try row.decode(column: "command", as: String?.self),
            nonce: try row.decode(column: "nonce", as: String.self),
            waitTokenHash: try row.decode(column: "wait_token_hash", as: String.self),
            code: try row.decode(column: "code", as: String.self),
            codeFailures: try row.decode(column: "code_failures", as: Int.self),
            state: ConfirmationState(rawValue: try row.decode(column: "state", as: String.self)) ?? .denied,
            approvedBy: try row.decode(column: "approved_by", as: String?.self),
            createdAt: try row.decode(column: "created_at", as: Int64.self),
            expiresAt: try row.decode(column: "expires_at", as: Int64.self),
            openedAt: try row.decode(column: "opened_at", as: Int64?.self)
        )
    }
}

extension ManagerStore {
    struct ConfirmationChange: Sendable {
        var id: String
        var accountId: String
        var changedAt: Int64
    }

    /// Confirmations started or decided after `since` (the wake-up sweep).
    func confirmationsChanged(since: Int64) async throws -> [ConfirmationChange] {
        try await sql.raw("SELECT id, account_id, changed_at FROM confirmations WHERE changed_at > \(bind: since)")
            .all().map { row in
                ConfirmationChange(
                    id: try row.decode(column: "id", as: String.self),
                    accountId: try row.decode(column: "account_id", as: String.self),
                    changedAt: try row.decode(column: "changed_at", as: Int64.self))
            }
    }
}
