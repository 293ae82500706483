import Foundation
import SQLKit
import XignProtocol

/// Accounts, their addresses and attributes.
extension ManagerStore {
    struct NewAccount: Sendable {
        var id: String
        var email: String
        /// The local login name hosts ask for (issue 12), unique among accounts.
        var loginName: String?
        /// Canonical JSON.
        var attributes: String
        var arbitraryAttributes: String?
        var serviceMappingId: String?
        var organization: String?
        var createdAt: Int64
    }

    /// An address merged into another account is as taken as an account's own.
    func isEmailTaken(_ email: String) async throws -> Bool {
        try await sql.raw(
            """
            SELECT email FROM accounts WHERE email = \(bind: email) UNION SELECT email FROM account_emails WHERE email = \(bind: email)
            """
        ).first() != nil
    }

    func insertAccount(_ account: NewAccount) async throws {
        try await sql.raw(
            """
            INSERT INTO accounts (id, email, login_name, attributes, arbitrary_attributes, service_mapping_id, organization, is_temporary, created_at)
            VALUES (\(bind: account.id), \(bind: account.email), \(bind: account.loginName), \(bind: account.attributes), \(bind: account.arbitraryAttributes),
                    \(bind: account.serviceMappingId), \(bind: account.organization), \(bind: account.organization == nil ? 0 : 1), \(bind: account.createdAt))
            """
        ).run()
    }

    func accountId(email: String) async throws -> String? {
        try await sql.raw("SELECT id FROM accounts WHERE email = \(bind: email)").first()?.decode(
            column: "id", as: String.self)
    }

    func isLoginNameTaken(_ loginName: String) async throws -> Bool {
        try await sql.raw("SELECT id FROM accounts WHERE login_name = \(bind: loginName)").first() != nil
    }

    /// Sets (or with nil clears) the login name of the account with `email`; returns the account's id, nil when there
    /// is no such account.
    func setLoginName(_ loginName: String?, email: String) async throws -> String? {
        try await sql.raw(
            "UPDATE accounts SET login_name = \(bind: loginName) WHERE email = \(bind: email) RETURNING id"
        ).first()?.decode(column: "id", as: String.self)
    }

    /// The account's own offline policy; nil values fall back to the manager's.
    func setOfflinePolicy(graceMilliseconds: Int64?, maxFailures: Int?, email: String) async throws -> Bool {
        try await sql.raw(
            """
            UPDATE accounts SET offline_grace = \(bind: graceMilliseconds), offline_max_failures = \(bind: maxFailures.map(Int64.init))
            WHERE email = \(bind: email) RETURNING id
            """
        ).first() != nil
    }

    /// The attribute values of the account that holds `activationId`, its email and login name included; empty when there is none.
    func accountAttributes(activationId: String) async throws -> [String: String] {
        guard
            let row = try await sql.raw(
                """
                SELECT c.email, c.login_name, c.attributes FROM activations a JOIN accounts c ON c.id = a.account_id WHERE a.id = \(bind: activationId)
                """
            ).first()
        else { return [:] }
        return try Self.accountAttributes(in: row)
    }

    /// The attributes of a row with the account's email, login_name and attributes columns.
    static func accountAttributes(in row: any SQLRow) throws -> [String: String] {
        accountAttributes(
            email: try row.decode(column: "email", as: String.self),
            loginName: try row.decode(column: "login_name", as: String?.self),
            json: try row.decode(column: "attributes", as: String.self))
    }

    static func accountAttributes(email: String, loginName: String?, json: String) -> [String: String] {
        var values = (try? JSONDecoder().decode([String: String].self, from: Data(json.utf8))) ?? [:]
        values["email"] = email
        values[AttributeValidator.loginName] = loginName
        return values
    }

    func makePermanent(accountId: String) async throws {
        try await sql.raw("UPDATE accounts SET is_temporary = 0 WHERE id = \(bind: accountId)").run()
    }

    /// The arbitrary attributes kept for a linked service until the first personalization, with that service.
    func keptAttributes(accountId: String) async throws -> (attributes: String, service: String?)? {
        guard
            let row = try await sql.raw(
                """
                SELECT arbitrary_attributes, service_mapping_id FROM accounts WHERE id = \(bind: accountId) AND arbitrary_attributes IS NOT NULL
                """
            ).first()
        else { return nil }
        return (
            try row.decode(column: "arbitrary_attributes", as: String.self),
            try row.decode(column: "service_mapping_id", as: String?.self)
        )
    }

    func forgetKeptAttributes(accountId: String) async throws {
        try await sql.raw("UPDATE accounts SET arbitrary_attributes = NULL WHERE id = \(bind: accountId)").run()
    }

    /// The temporary account an invite's personalization session belongs to, with its address.
    func invitedAccount(personalizationSession session: String) async throws -> (id: String, email: String)? {
        guard
            let row = try await sql.raw(
                """
                SELECT c.id, c.email FROM personalization_sessions s JOIN activations a ON a.id = s.activation_id JOIN accounts c ON c.id = a.account_id
                WHERE s.id = \(bind: session) AND s.outcome = 'mergePersonalization' AND c.is_temporary = 1
                """
            ).first()
        else { return nil }
        return (try row.decode(column: "id", as: String.self), try row.decode(column: "email", as: String.self))
    }

    func accountId(activationId: String) async throws -> String? {
        try await sql.raw("SELECT account_id FROM activations WHERE id = \(bind: activationId)").first()?.decode(
            column: "account_id", as: String.self)
    }

    /// Deletes `account` (its activations go with it) and gives its address to `target`.
    func mergeAccount(_ account: (id: String, email: String), into target: String) async throws {
        try await sql.raw("DELETE FROM accounts WHERE id = \(bind: account.id)").run()
        try await sql.raw(
            "INSERT INTO account_emails (email, account_id) VALUES (\(bind: account.email), \(bind: target))"
        ).run()
    }

    /// Every address of the account: the one it registered with and those merged into it.
    func emails(ofAccount accountId: String) async throws -> [String] {
        try await sql.raw(
            """
            SELECT email FROM accounts WHERE id = \(bind: accountId) UNION SELECT email FROM account_emails WHERE account_id = \(bind: accountId)
            """
        ).all().map { try $0.decode(column: "email", as: String.self) }
    }

    /// Deletes the account with everything that hangs on it (activations, devices, sessions, confirmations, addresses,
    /// cool-downs) and its queued mail. Its audit entries stay for `audit.keep`, each address replaced by `pseudonym`.
    /// Returns how many devices held an activation.
    func deleteAccount(_ accountId: String, pseudonym: (String) -> String) async throws -> Int {
        let emails = try await emails(ofAccount: accountId)
        let devices = try await devices(ofAccount: accountId).count
        for email in emails {
            try await sql.raw("UPDATE audit_events SET email = \(bind: pseudonym(email)) WHERE email = \(bind: email)")
                .run()
            try await sql.raw("DELETE FROM mail_queue WHERE recipient = \(bind: email)").run()
        }
        try await sql.raw("DELETE FROM confirmation_cooldowns WHERE account_id = \(bind: accountId)").run()
        try await sql.raw("DELETE FROM accounts WHERE id = \(bind: accountId)").run()
        return devices
    }

    /// One page of the accounts in address order (`limit + 1` of them, so the caller sees whether more follow), each
    /// with its host groups and its number of activations: two statements whatever the number of accounts.
    func accountSummaries(after: String, limit: Int) async throws -> [IdentityManager.AccountSummary] {
        let rows = try await sql.raw(
            """
            SELECT c.email, c.login_name, c.uid, c.maps_local_user, c.attributes, c.organization, c.is_temporary, c.created_at,
                   (SELECT COUNT(*) FROM activations a WHERE a.account_id = c.id) AS n
            FROM accounts c WHERE c.email > \(bind: after) ORDER BY c.email LIMIT \(bind: limit + 1)
            """
        ).all()
        // The same page again, driving the join: a range of addresses the planner would price as a whole-table join.
        var hostGroups: [String: [String]] = [:]
        for row in try await sql.raw(
            """
            SELECT c.email, g.group_name
            FROM (SELECT id, email FROM accounts WHERE email > \(bind: after) ORDER BY email LIMIT \(bind: limit + 1)) c
            JOIN account_host_groups g ON g.account_id = c.id ORDER BY g.group_name
            """
        ).all() {
            hostGroups[try row.decode(column: "email", as: String.self), default: []].append(
                try row.decode(column: "group_name", as: String.self))
        }
        return try rows.map { row in
            let attributes = try? JSONDecoder().decode(
                [String: String].self, from: Data(try row.decode(column: "attributes", as: String.self).utf8))
            let loginName = try row.decode(column: "login_name", as: String?.self)
            return IdentityManager.AccountSummary(
                email: try row.decode(column: "email", as: String.self),
                loginName: loginName,
                uid: try row.decode(column: "uid", as: Int64?.self),
                mapsLocalUser: try row.decode(column: "maps_local_user", as: Int.self) != 0,
                requestedLoginName: loginName == nil ? attributes?[AttributeValidator.loginName] : nil,
                hostGroups: hostGroups[try row.decode(column: "email", as: String.self)] ?? [],
                organization: try row.decode(column: "organization", as: String?.self),
                isTemporary: try row.decode(column: "is_temporary", as: Int.self) != 0,
                activations: try row.decode(column: "n", as: Int.self),
                createdAt: try row.decode(column: "created_at", as: Int64.self)
            )
        }
    }
}
