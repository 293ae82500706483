import Foundation
import SQLKit
import XignCrypto
import XignProtocol

/// What `xign-manager admin` shows and changes.
extension IdentityManager {
    public struct AccountSummary: Codable, Sendable {
        public var email: String
        public var organization: String?
        public var isTemporary: Bool
        public var activations: Int
        public var createdAt: Int64
    }

    public struct ActivationSummary: Codable, Sendable {
        public var id: String
        public var email: String
        public var alias: String
        public var state: String
        public var deviceId: String?
        public var keyKind: String?
        public var failedAttempts: Int
        public var lockedUntil: Int64
        public var permanentlyLocked: Bool
    }

    public func accounts() async throws -> [AccountSummary] {
        try await database.transaction { sql in
            try await sql.raw("""
                SELECT c.email, c.organization, c.is_temporary, c.created_at, COUNT(a.id) AS n
                FROM accounts c LEFT JOIN activations a ON a.account_id = c.id
                GROUP BY c.id, c.email, c.organization, c.is_temporary, c.created_at ORDER BY c.created_at
                """).all().map { row in
                AccountSummary(
                    email: try row.decode(column: "email", as: String.self),
                    organization: try row.decode(column: "organization", as: String?.self),
                    isTemporary: try row.decode(column: "is_temporary", as: Int.self) != 0,
                    activations: try row.decode(column: "n", as: Int.self),
                    createdAt: try row.decode(column: "created_at", as: Int64.self)
                )
            }
        }
    }

    public func activations(email: String?) async throws -> [ActivationSummary] {
        try await database.transaction { sql in
            let filter = email.map { SQLQueryString("WHERE c.email = \(bind: $0.lowercased())") } ?? SQLQueryString("")
            return try await sql.raw("""
                SELECT a.id, c.email, a.alias, a.state, a.device_id, d.key_kind, a.failed_attempts, a.locked_until, a.permanently_locked
                FROM activations a JOIN accounts c ON c.id = a.account_id LEFT JOIN devices d ON d.id = a.device_id
                \(filter) ORDER BY a.created_at
                """).all().map { row in
                ActivationSummary(
                    id: try row.decode(column: "id", as: String.self),
                    email: try row.decode(column: "email", as: String.self),
                    alias: try row.decode(column: "alias", as: String.self),
                    state: try row.decode(column: "state", as: String.self),
                    deviceId: try row.decode(column: "device_id", as: String?.self),
                    keyKind: try row.decode(column: "key_kind", as: String?.self),
                    failedAttempts: try row.decode(column: "failed_attempts", as: Int.self),
                    lockedUntil: try row.decode(column: "locked_until", as: Int64.self),
                    permanentlyLocked: try row.decode(column: "permanently_locked", as: Int.self) != 0
                )
            }
        }
    }

    /// Lifts a lockout, including a permanent one: the administrator's way back for a user who proved who they are.
    public func unlock(activationId: String) async throws {
        try await database.transaction { sql in
            guard try await sql.raw("""
                UPDATE activations SET failed_attempts = 0, locked_until = 0, permanently_locked = 0, pin_check_until = 0 WHERE id = \(bind: activationId) RETURNING id
                """).first() != nil else {
                throw ManagerError(.notFound, .activationNotFound, "no activation \(activationId); `xign-manager admin activations` lists them")
            }
        }
        logger.notice("lockout lifted by administrator", metadata: ["activation": "\(activationId)"])
    }

    /// An organization invite: a temporary account with an activation whose PIN the manager chooses.
    /// Returns that PIN, for the administrator to hand over by another channel than the mail.
    public func invite(email: String, organization: String) async throws -> String {
        guard EmailValidator.validate(email) == .valid else { throw ManagerError.badRequest("'\(email)' is not a valid email address") }
        guard TextAttributeValidator.validate(organization) == .valid else { throw ManagerError.badRequest("the organization name is empty or too long") }
        let policy = configuration.pinPolicy
        var pin = ""
        repeat {
            pin = String((0..<policy.minLength).map { _ in Character(String(Int.random(in: 0...9))) })
        } while policy.validate(pin) != .valid
        let account = NewAccount(email: email.lowercased(), attributes: [:], arbitraryAttributes: nil, serviceMappingId: nil, organization: organization)
        let alias = "\(organization) invite"
        let (payload, _) = try await createAccount(account, pin: pin, alias: alias)
        try send(Outbox.activationMail(to: email, alias: alias, payload: payload))
        logger.info("organization invite", metadata: ["email": "\(email)", "organization": "\(organization)"])
        return pin
    }

    public func pendingMail() throws -> [String] { try outbox.pending() }
}
