import SQLKit
import XignProtocol

/// What the console reads and changes beyond the administrator's commands: roles, the lock an administrator puts on
/// an account, and the account list with its lock state, failures and last use.
extension ManagerStore {
    struct ConsoleAccount: Sendable {
        var id: String
        var email: String
        var loginName: String?
        var uid: Int64?
        var role: ConsoleRole?
        /// When an administrator locked the account, and who; nil while it is not locked.
        var lockedAt: Int64?
        var lockedBy: String?
        /// The role that locked it: a helpdesk lifts only a helpdesk's lock. The command line counts as an administrator.
        var lockedByRole: ConsoleRole?
        var activations: Int
        /// Wrong PINs since the last good one, over the account's activations.
        var failedAttempts: Int
        /// A PIN lockout in force on one of its activations (until, or permanent).
        var pinLockedUntil: Int64
        var permanentlyLocked: Bool
        var lastUsedAt: Int64?
        var createdAt: Int64
        /// The account's own offline policy; nil: the manager's.
        var offlineGraceMilliseconds: Int64?
        var offlineMaxFailures: Int?
    }

    private static let consoleAccountColumns = SQLQueryString(
        """
        SELECT c.id, c.email, c.login_name, c.uid, c.role, c.locked_at, c.locked_by, c.locked_by_role, c.created_at, c.offline_grace,
               c.offline_max_failures, COUNT(a.id) AS n,
               CAST(COALESCE(SUM(a.failed_attempts), 0) AS BIGINT) AS failures, COALESCE(MAX(a.locked_until), 0) AS pin_locked_until,
               COALESCE(MAX(a.permanently_locked), 0) AS permanent, MAX(d.last_used_at) AS last_used_at
        FROM accounts c LEFT JOIN activations a ON a.account_id = c.id LEFT JOIN devices d ON d.id = a.device_id
        """)
    private static let consoleAccountGroup = SQLQueryString(
        """
        GROUP BY c.id, c.email, c.login_name, c.uid, c.role, c.locked_at, c.locked_by, c.locked_by_role, c.created_at, c.offline_grace,
                 c.offline_max_failures
        """)

    /// Accounts whose address or login name contains `search` (all when empty), in address order after `after`, at most
    /// `limit`; the page is chosen before the activations are counted, so its cost does not grow with the accounts.
    func consoleAccounts(matching search: String, after: String, limit: Int) async throws -> [ConsoleAccount] {
        let pattern =
            "%"
            + search.lowercased().replacingOccurrences(of: "\\", with: "\\\\")
            .replacingOccurrences(of: "%", with: "\\%").replacingOccurrences(of: "_", with: "\\_") + "%"
        return try await sql.raw(
            """
            \(Self.consoleAccountColumns)
            WHERE c.id IN (SELECT id FROM accounts WHERE is_temporary = 0 AND email > \(bind: after)
                           AND (email LIKE \(bind: pattern) ESCAPE '\\' OR login_name LIKE \(bind: pattern) ESCAPE '\\')
                           ORDER BY email LIMIT \(bind: limit))
            \(Self.consoleAccountGroup) ORDER BY c.email
            """
        ).all().map(ConsoleAccount.init)
    }

    func consoleAccount(id: String) async throws -> ConsoleAccount? {
        try await sql.raw("\(Self.consoleAccountColumns) WHERE c.id = \(bind: id) \(Self.consoleAccountGroup)")
            .first().map(ConsoleAccount.init)
    }

    func consoleAccount(email: String) async throws -> ConsoleAccount? {
        try await sql.raw(
            "\(Self.consoleAccountColumns) WHERE c.email = \(bind: email.lowercased()) \(Self.consoleAccountGroup)"
        ).first().map(ConsoleAccount.init)
    }

    /// The administrators that are not locked, but for `accountId`.
    func unlockedAdministrators(except accountId: String) async throws -> Int {
        try await sql.raw(
            """
            SELECT COUNT(*) AS n FROM accounts
            WHERE role = \(bind: ConsoleRole.admin.rawValue) AND locked_at IS NULL AND id <> \(bind: accountId)
            """
        ).first()?.decode(column: "n", as: Int.self) ?? 0
    }

    /// The account and role of the device's account, for a console session.
    func consoleAccount(ofDevice deviceId: String) async throws -> ConsoleAccount? {
        try await sql.raw(
            """
            \(Self.consoleAccountColumns) WHERE c.id = (SELECT a2.account_id FROM devices d2 JOIN activations a2 ON a2.id = d2.activation_id
                                                        WHERE d2.id = \(bind: deviceId))
            \(Self.consoleAccountGroup)
            """
        ).first().map(ConsoleAccount.init)
    }

    func setMapsLocalUser(_ maps: Bool, accountId: String) async throws {
        try await sql.raw("UPDATE accounts SET maps_local_user = \(bind: maps ? 1 : 0) WHERE id = \(bind: accountId)")
            .run()
    }

    func setRole(_ role: ConsoleRole?, accountId: String) async throws {
        try await sql.raw("UPDATE accounts SET role = \(bind: role?.rawValue) WHERE id = \(bind: accountId)").run()
    }

    /// The accounts holding `role`.
    func accounts(withRole role: ConsoleRole) async throws -> Int {
        try await sql.raw("SELECT COUNT(*) AS n FROM accounts WHERE role = \(bind: role.rawValue)").first()?
            .decode(column: "n", as: Int.self) ?? 0
    }

    func lockAccount(_ accountId: String, at: Int64, by actor: String, role: ConsoleRole) async throws {
        try await sql.raw(
            """
            UPDATE accounts SET locked_at = \(bind: at), locked_by = \(bind: actor), locked_by_role = \(bind: role.rawValue)
            WHERE id = \(bind: accountId)
            """
        ).run()
    }

    /// Lifts the administrator's lock and every PIN lockout of the account's activations.
    func unlockAccount(_ accountId: String) async throws {
        try await sql.raw(
            "UPDATE accounts SET locked_at = NULL, locked_by = NULL, locked_by_role = NULL WHERE id = \(bind: accountId)"
        ).run()
        try await sql.raw(
            """
            UPDATE activations SET failed_attempts = 0, locked_until = 0, permanently_locked = 0, pin_check_until = 0
            WHERE account_id = \(bind: accountId)
            """
        ).run()
    }

    func isAccountLocked(_ accountId: String) async throws -> Bool {
        try await sql.raw("SELECT locked_at FROM accounts WHERE id = \(bind: accountId)").first()?
            .decode(column: "locked_at", as: Int64?.self) != nil
    }

    /// A login that waits for its approval, as the console lists it (the code stays the host's).
    struct WaitingLogin: Sendable {
        var loginName: String
        var email: String
        var hostName: String
        var service: String
        var remoteHost: String?
        var createdAt: Int64
        var expiresAt: Int64
    }

    /// The logins waiting for approval on every host, newest first, at most `limit`.
    func waitingLogins(now: Int64, limit: Int) async throws -> [WaitingLogin] {
        try await sql.raw(
            """
            SELECT f.login_name, c.email, h.name AS host_name, f.service, f.remote_host, f.created_at, f.expires_at
            FROM confirmations f JOIN accounts c ON c.id = f.account_id JOIN hosts h ON h.id = f.host_id
            WHERE f.state = 'pending' AND f.expires_at > \(bind: now) ORDER BY f.created_at DESC LIMIT \(bind: limit)
            """
        ).all().map { row in
            WaitingLogin(
                loginName: try row.decode(column: "login_name", as: String.self),
                email: try row.decode(column: "email", as: String.self),
                hostName: try row.decode(column: "host_name", as: String.self),
                service: try row.decode(column: "service", as: String.self),
                remoteHost: try row.decode(column: "remote_host", as: String?.self),
                createdAt: try row.decode(column: "created_at", as: Int64.self),
                expiresAt: try row.decode(column: "expires_at", as: Int64.self))
        }
    }

    /// Audit entries that match every filter given, newest first, at most `limit`.
    func auditEvents(matching filter: AuditFilter, limit: Int) async throws -> [AuditEvent] {
        var conditions: [SQLQueryString] = ["at >= \(bind: filter.since)", "at < \(bind: filter.until)"]
        if let email = filter.email { conditions.append("email = \(bind: email.lowercased())") }
        if let host = filter.host { conditions.append("host = \(bind: host)") }
        if let kind = filter.kind { conditions.append("event = \(bind: kind.rawValue)") }
        let condition = conditions.joined(separator: " AND ")
        return try await sql.raw(
            """
            SELECT at, event, email, activation_id, host, service, detail, actor FROM audit_events
            WHERE \(condition) ORDER BY at DESC, id DESC LIMIT \(bind: limit)
            """
        ).all().map(AuditEvent.init)
    }
}

/// What the console's audit search filters by; a nil field filters nothing.
public struct AuditFilter: Sendable, Equatable {
    public var email: String?
    public var host: String?
    public var kind: AuditEvent.Kind?
    public var since: Int64
    public var until: Int64

    public init(email: String? = nil, host: String? = nil, kind: AuditEvent.Kind? = nil, since: Int64, until: Int64) {
        (self.email, self.host, self.kind, self.since, self.until) = (email, host, kind, since, until)
    }
}

extension ManagerStore.ConsoleAccount {
    init(_ row: any SQLRow) throws {
        id = try row.decode(column: "id", as: String.self)
        email = try row.decode(column: "email", as: String.self)
        loginName = try row.decode(column: "login_name", as: String?.self)
        uid = try row.decode(column: "uid", as: Int64?.self)
        role = try row.decode(column: "role", as: String?.self).flatMap(ConsoleRole.init(rawValue:))
        lockedAt = try row.decode(column: "locked_at", as: Int64?.self)
        lockedBy = try row.decode(column: "locked_by", as: String?.self)
        lockedByRole = try row.decode(column: "locked_by_role", as: String?.self).flatMap(ConsoleRole.init(rawValue:))
        activations = try row.decode(column: "n", as: Int.self)
        failedAttempts = try row.decode(column: "failures", as: Int.self)
        pinLockedUntil = try row.decode(column: "pin_locked_until", as: Int64.self)
        permanentlyLocked = try row.decode(column: "permanent", as: Int.self) != 0
        lastUsedAt = try row.decode(column: "last_used_at", as: Int64?.self)
        createdAt = try row.decode(column: "created_at", as: Int64.self)
        offlineGraceMilliseconds = try row.decode(column: "offline_grace", as: Int64?.self)
        offlineMaxFailures = try row.decode(column: "offline_max_failures", as: Int?.self)
    }
}
