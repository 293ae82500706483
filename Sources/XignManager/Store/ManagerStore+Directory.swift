import Foundation
import SQLKit
import XignProtocol

/// Users on every machine: the uids the manager gives and the directory each host serves.
extension ManagerStore {
    /// Gives the account its uid from `range` unless it has one. The counter only grows, so the number of a deleted
    /// account is never given again, and a narrower range never goes back to numbers given before.
    func assignUnixId(accountId: String, range: ClosedRange<Int64>) async throws {
        guard try await uid(accountId: accountId) == nil else { return }
        let counter =
            try await sql.raw("SELECT next_id FROM unix_id_counter").first()?.decode(column: "next_id", as: Int64.self)
            ?? range.lowerBound
        let uid = max(counter, range.lowerBound)
        guard uid <= range.upperBound else {
            throw ManagerError(
                .conflict, .conflict,
                "users.uid_range (\(range.lowerBound)-\(range.upperBound)) has no number left above those given (the next is \(uid)); widen the range in manager.conf or move it up"
            )
        }
        try await sql.raw("UPDATE unix_id_counter SET next_id = \(bind: uid + 1)").run()
        try await sql.raw("UPDATE accounts SET uid = \(bind: uid) WHERE id = \(bind: accountId)").run()
    }

    func uid(accountId: String) async throws -> Int64? {
        try await sql.raw("SELECT uid FROM accounts WHERE id = \(bind: accountId)").first()?
            .decode(column: "uid", as: Int64?.self)
    }

    /// The local groups members of `hostGroup` join on its hosts; an empty list removes the mapping.
    func setLocalGroups(_ localGroups: [String], hostGroup: String) async throws {
        try await sql.raw("DELETE FROM host_group_local_groups WHERE group_name = \(bind: hostGroup)").run()
        for group in Set(localGroups) {
            try await sql.raw(
                "INSERT INTO host_group_local_groups (group_name, local_group) VALUES (\(bind: hostGroup), \(bind: group))"
            ).run()
        }
    }

    /// Every host group's local groups, by host group.
    func localGroupMappings() async throws -> [String: [String]] {
        var mappings: [String: [String]] = [:]
        for row in try await sql.raw(
            "SELECT group_name, local_group FROM host_group_local_groups ORDER BY group_name, local_group"
        ).all() {
            mappings[try row.decode(column: "group_name", as: String.self), default: []].append(
                try row.decode(column: "local_group", as: String.self))
        }
        return mappings
    }

    /// The accounts that may log in to `hostName` (the access rule of `mayLogIn`), with the local groups of the host
    /// groups they share with it, ordered by uid; only the one with `loginName` or `uid` when either is given. A locked
    /// account is there, marked, with no local group.
    func directory(hostName: String, loginName: String? = nil, uid: Int64? = nil) async throws -> [DirectoryUser] {
        let only: SQLQueryString =
            if let loginName { "AND c.login_name = \(bind: loginName)" } else if let uid {
                "AND c.uid = \(bind: uid)"
            } else { "" }
        let accounts = try await sql.raw(
            """
            SELECT c.id, c.login_name, c.uid, c.attributes, c.locked_at FROM accounts c
            WHERE c.login_name IS NOT NULL AND c.uid IS NOT NULL \(only) AND EXISTS (
                SELECT 1 FROM account_host_groups g WHERE g.account_id = c.id AND (g.group_name = \(bind: IdentityManager.everyHost)
                    OR g.group_name IN (SELECT group_name FROM host_groups WHERE host_name = \(bind: hostName))))
            ORDER BY c.uid
            """
        ).all()
        let onlyAccount: SQLQueryString =
            if loginName != nil || uid != nil, let row = accounts.first {
                "AND g.account_id = \(bind: try row.decode(column: "id", as: String.self))"
            } else { "" }
        var localGroups: [String: [String]] = [:]
        for row in try await sql.raw(
            """
            SELECT DISTINCT g.account_id, m.local_group FROM account_host_groups g
            JOIN host_groups h ON h.group_name = g.group_name AND h.host_name = \(bind: hostName)
            JOIN host_group_local_groups m ON m.group_name = g.group_name
            WHERE 1 = 1 \(onlyAccount)
            ORDER BY m.local_group
            """
        ).all() {
            localGroups[try row.decode(column: "account_id", as: String.self), default: []].append(
                try row.decode(column: "local_group", as: String.self))
        }
        return try accounts.map { row in
            let id = try row.decode(column: "id", as: String.self)
            let locked = try row.decode(column: "locked_at", as: Int64?.self) != nil
            let attributes =
                (try? JSONDecoder().decode(
                    [String: String].self, from: Data(try row.decode(column: "attributes", as: String.self).utf8)))
                ?? [:]
            return DirectoryUser(
                loginName: try row.decode(column: "login_name", as: String.self),
                uid: try row.decode(column: "uid", as: Int64.self),
                displayName: String(
                    DisplayText.sanitized(
                        [attributes["givenName"], attributes["familyName"]].compactMap { $0 }.joined(separator: " "),
                        keepingLineFeeds: false
                    ).unicodeScalars.prefix(WireLimit.attributeValue)),
                localGroups: locked ? [] : localGroups[id] ?? [], locked: locked)
        }
    }
}
