import SQLKit
import XignCrypto

/// The audit of security events, written in the transaction of the change it records.
extension ManagerStore {
    func recordAudit(_ event: AuditEvent) async throws {
        try await sql.raw(
            """
            INSERT INTO audit_events (id, at, event, email, activation_id, host, service, detail, actor)
            VALUES (\(bind: try SecureRandom.identifier()), \(bind: event.at), \(bind: event.event.rawValue), \(bind: event.email),
                    \(bind: event.activationId), \(bind: event.host), \(bind: event.service), \(bind: event.detail), \(bind: event.actor))
            """
        ).run()
    }

    /// Events at or after `since`, oldest first, at most `limit`.
    func auditEvents(since: Int64, limit: Int) async throws -> [AuditEvent] {
        try await sql.raw(
            """
            SELECT at, event, email, activation_id, host, service, detail, actor FROM audit_events
            WHERE at >= \(bind: since) ORDER BY at, id LIMIT \(bind: limit)
            """
        ).all().map(AuditEvent.init)
    }
}

extension AuditEvent {
    init(_ row: any SQLRow) throws {
        self.init(
            at: try row.decode(column: "at", as: Int64.self),
            event: AuditEvent.Kind(rawValue: try row.decode(column: "event", as: String.self)) ?? .unknown,
            email: try row.decode(column: "email", as: String?.self),
            activationId: try row.decode(column: "activation_id", as: String?.self),
            host: try row.decode(column: "host", as: String?.self),
            service: try row.decode(column: "service", as: String?.self),
            detail: try row.decode(column: "detail", as: String?.self),
            actor: try row.decode(column: "actor", as: String.self))
    }
}
