import SQLKit

/// The rows that keep the manager running rather than record users: the mail queue, rate-limit counters,
/// and the deletion of what ran out.
extension ManagerStore {
    // MARK: Mail queue

    struct QueuedMail: Sendable {
        var id: String
        var recipient: String
        var message: String
        var createdAt: Int64
        var attempts: Int
    }

    func queueMail(id: String, recipient: String, message: String, now: Int64) async throws {
        try await sql.raw(
            """
            INSERT INTO mail_queue (id, recipient, message, created_at, claimed_until, attempts)
            VALUES (\(bind: id), \(bind: recipient), \(bind: message), \(bind: now), 0, 0)
            """
        ).run()
    }

    /// Takes the oldest due mail (or the one named `id`) until `until`; no other instance sends it meanwhile.
    /// Claims mail `id`, or else the oldest mail due that was queued before `queuedBefore`.
    func claimMail(id: String? = nil, now: Int64, until: Int64, queuedBefore: Int64) async throws -> QueuedMail? {
        let which =
            id.map { SQLQueryString("id = \(bind: $0) AND claimed_until < \(bind: now)") }
            ?? SQLQueryString(
                "id = (SELECT id FROM mail_queue WHERE claimed_until < \(bind: now) AND created_at < \(bind: queuedBefore) ORDER BY created_at LIMIT 1)"
            )
        guard
            let row = try await sql.raw(
                """
                UPDATE mail_queue SET claimed_until = \(bind: until), attempts = attempts + 1 WHERE \(which)
                RETURNING id, recipient, message, created_at, attempts
                """
            ).first()
        else { return nil }
        return try Self.queuedMail(row)
    }

    func deleteMail(id: String) async throws {
        try await sql.raw("DELETE FROM mail_queue WHERE id = \(bind: id)").run()
    }

    func queuedMail() async throws -> [QueuedMail] {
        try await sql.raw("SELECT id, recipient, message, created_at, attempts FROM mail_queue ORDER BY created_at")
            .all().map(Self.queuedMail)
    }

    private static func queuedMail(_ row: any SQLRow) throws -> QueuedMail {
        QueuedMail(
            id: try row.decode(column: "id", as: String.self),
            recipient: try row.decode(column: "recipient", as: String.self),
            message: try row.decode(column: "message", as: String.self),
            createdAt: try row.decode(column: "created_at", as: Int64.self),
            attempts: try row.decode(column: "attempts", as: Int.self)
        )
    }

    // MARK: Rate limits

    /// Counts one use of `key` in the fixed window that starts at `windowStart`; returns the uses in that window so far.
    /// One statement, so uses on several instances at once are all counted.
    func countUse(of key: String, windowStart: Int64) async throws -> Int {
        try await sql.raw(
            """
            INSERT INTO rate_limits (key, window_start, count) VALUES (\(bind: key), \(bind: windowStart), 1)
            ON CONFLICT (key) DO UPDATE SET
                count = CASE WHEN rate_limits.window_start = excluded.window_start THEN rate_limits.count + 1 ELSE 1 END,
                window_start = excluded.window_start
            RETURNING count
            """
        ).first()?.decode(column: "count", as: Int.self) ?? 1
    }

    // MARK: Expiry

    /// What ran out and is deleted, table by table (the table's name, its key, and when a row ran out).
    enum Purge: String, CaseIterable {
        case authentications
        case personalizationSessions = "personalization_sessions"
        case confirmations
        case deviceChallenges = "device_challenges"
        case hostChallenges = "host_challenges"
        case hostJoinTokens = "host_join_tokens"
        case rateLimits = "rate_limits"
        case confirmationCooldowns = "confirmation_cooldowns"
        case auditEvents = "audit_events"
        case webSessions = "web_sessions"
        case consoleSessions = "console_sessions"
        case providerRegistrations = "provider_registrations"
        case activationCancellations = "activation_cancellations"
        case attestationChallenges = "attestation_challenges"
        case sessionCovers = "session_covers"

        var key: String {
            switch self {
            case .deviceChallenges, .hostChallenges: "challenge"
            case .hostJoinTokens: "name"
            case .rateLimits: "key"
            case .confirmationCooldowns: "account_id || ' ' || source"
            case .webSessions, .consoleSessions, .activationCancellations: "token_hash"
            default: "id"
            }
        }
    }

    /// Deletes at most `limit` rows of `purge` that ran out: authentications past their expiry whose code is redeemed
    /// or past too, sessions, challenges, join tokens, confirmations and cool-downs before `cutoff`, rate-limit windows
    /// that ended, audit entries older than `audit.keep`. Returns how many it deleted.
    func purge(
        _ purge: Purge, before cutoff: Int64, windowsBefore windowCutoff: Int64, auditBefore auditCutoff: Int64,
        limit: Int
    ) async throws -> Int {
        let expired: SQLQueryString
        switch purge {
        case .authentications:
            expired = "expires_at < \(bind: cutoff) AND (code IS NULL OR code_expires_at < \(bind: cutoff))"
        case .rateLimits: expired = "window_start < \(bind: windowCutoff)"
        case .confirmationCooldowns: expired = "blocked_until < \(bind: cutoff)"
        case .auditEvents: expired = "at < \(bind: auditCutoff)"
        default: expired = "expires_at < \(bind: cutoff)"
        }
        let table = SQLQueryString(purge.rawValue), key = SQLQueryString(purge.key)
        return try await sql.raw(
            """
            DELETE FROM \(table) WHERE \(key) IN (SELECT \(key) FROM \(table) WHERE \(expired) LIMIT \(bind: limit)) RETURNING 1 AS deleted
            """
        ).all().count
    }
}
