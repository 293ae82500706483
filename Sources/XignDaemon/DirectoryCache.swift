import Foundation
import XignProtocol

/// The files the NSS module reads, in /etc's own formats so it parses them with glibc's fgetpwent_r and fgetgrent_r:
/// `passwd` (the accounts), `group` (their private groups, gid = uid) and `memberships` (the local groups they join,
/// with the local gid and the members). Root writes them whole (a temporary file and a rename), readable by everyone,
/// like /etc/passwd.
///
/// The password fields are `*`: no password, and none in /etc/shadow to look for (pam_unix's account check then
/// passes, as for SSSD's users); people log in with XignIn. A locked account's is `!`, as `passwd -l` marks one, and it
/// joins no local group; pam_xign's account phase refuses it (AccountCheck).
///
/// Local users win (docs/security.md, H5): an account whose name or number a local user or group has is left out,
/// and so is one that another source of the host's (SSSD, LDAP, homed …) names or numbers, or whose name is reserved
/// (a system user or group, a cloud image's first user, or one the host's sysusers.d declares). An account joins a
/// local group only where the host has it and grants it (`[directory] local_groups` in xign.conf, `sudo` by default);
/// the manager never makes one. The module checks the local files again at each lookup, so a user added locally after
/// this write wins at once.
public struct DirectoryCache: Sendable {
    static let home = "/home", shell = "/bin/bash"
    /// The most of /etc/passwd or /etc/group read.
    static let localFileLimit = 8 * 1024 * 1024

    public let directory: String
    let localPasswd: String
    let localGroup: String
    /// The local groups the manager may have accounts join here.
    let grantedGroups: Set<String>
    /// The names this host declares besides `ReservedNames` (its sysusers.d).
    let reservedNames: Set<String>
    let otherSources: OtherUserSources?

    public init(
        directory: String, localPasswd: String = "/etc/passwd", localGroup: String = "/etc/group",
        grantedGroups: Set<String> = ["sudo"], reservedNames: Set<String>? = nil, nsswitch: String? = nil
    ) {
        self.directory = directory
        self.localPasswd = localPasswd
        self.localGroup = localGroup
        self.grantedGroups = grantedGroups
        self.reservedNames = reservedNames ?? HostReservedNames.load()
        otherSources = nsswitch.map { OtherUserSources(nsswitch: $0) }
    }

    /// What one write served and left out, for the log.
    public struct Written: Equatable, Sendable {
        public var served: [DirectoryUser]
        /// "alice (uid 1879048192): a local user is named alice", one per account left out.
        public var collisions: [String]
        /// Local groups the manager named that this host does not have.
        public var missingGroups: [String]
        /// Local groups the manager named that this host does not grant.
        public var refusedGroups: [String] = []
    }

    /// Writes the cache for `users`, leaving out what collides, and the host's sudo policies, to be served until
    /// `validUntil`; the manager answered at `answeredAt` (both seconds since 1970).
    public func write(
        _ users: [DirectoryUser], sudoPolicies: [String: SudoPolicy] = [:], validUntil: Int64 = .max,
        answeredAt: Int64 = 0
    ) throws -> Written {
        let localUsers = try Self.entries(of: localPasswd)
        let localGroups = try Self.entries(of: localGroup)
        let localGroupIds = Dictionary(localGroups.map { ($0.name, $0.id) }, uniquingKeysWith: { first, _ in first })
        let takenNames = Set(localUsers.map(\.name)).union(localGroups.map(\.name))
        let takenIds = Set(localUsers.map(\.id)).union(localGroups.map(\.id))
        var written = Written(served: [], collisions: [], missingGroups: [])
        var seenNames = Set<String>(), seenIds = Set<Int64>()
        var members: [String: [String]] = [:]
        for user in users {
            if let clash = clash(of: user, takenNames: takenNames, takenIds: takenIds)
                ?? (!seenNames.insert(user.loginName).inserted || !seenIds.insert(user.uid).inserted
                    ? "the manager named it or numbered it twice" : nil)
            {
                written.collisions.append("\(user.loginName) (uid \(user.uid)): \(clash)")
                continue
            }
            written.served.append(user)
            for group in user.locked ? [] : user.localGroups {
                if !grantedGroups.contains(group) {
                    if !written.refusedGroups.contains(group) { written.refusedGroups.append(group) }
                } else if localGroupIds[group] == nil {
                    if !written.missingGroups.contains(group) { written.missingGroups.append(group) }
                } else {
                    members[group, default: []].append(user.loginName)
                }
            }
        }
        let served = written.served
        try AtomicFile.makeDirectory(directory, mode: 0o755, enforceMode: true)
        try publish(
            members.keys.sorted().map { "\($0):*:\(localGroupIds[$0]!):\(members[$0]!.joined(separator: ","))\n" },
            as: DirectoryFiles.memberships)
        try publish(served.map { "\($0.loginName):*:\($0.uid):\n" }, as: DirectoryFiles.group)
        try publish(served.map(Self.passwdLine), as: DirectoryFiles.passwd)
        try publish(
            sudoPolicies.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value.rawValue)\n" },
            as: DirectoryFiles.sudoPolicies)
        try publish(["\(validUntil)\n"], as: DirectoryFiles.validUntil)
        try publish(["\(answeredAt)\n"], as: DirectoryFiles.answeredAt)
        return written
    }

    /// Why `user` is not served here, or nil: a local user or group, a reserved name, another source's user or group.
    private func clash(of user: DirectoryUser, takenNames: Set<String>, takenIds: Set<Int64>) -> String? {
        if takenNames.contains(user.loginName) { return "a local user or group is named \(user.loginName)" }
        if takenIds.contains(user.uid) { return "a local user or group has the number \(user.uid)" }
        if ReservedNames.contains(user.loginName) || reservedNames.contains(user.loginName) {
            return "\(user.loginName) is reserved for a system user or group here"
        }
        if let source = otherSources?.owner(ofName: user.loginName) {
            return "the host's source \(source) has a user or group named \(user.loginName)"
        }
        if let source = otherSources?.owner(ofId: user.uid) {
            return "the host's source \(source) has a user or group with the number \(user.uid)"
        }
        return nil
    }

    /// The accounts the cache serves now (what an earlier xignd wrote), by name and number.
    public func served() -> [(name: String, id: Int64)] { DirectoryFiles.served(in: directory) }

    private func publish(_ lines: [String], as name: String) throws {
        try AtomicFile.write(Data(lines.joined().utf8), to: directory + "/" + name, mode: 0o644)
    }

    /// The account's line in `passwd`: one line of seven fields whatever the manager sent (a name is a login name,
    /// checked with the answer; the comment is filtered here).
    static func passwdLine(_ user: DirectoryUser) -> String {
        let password = user.locked ? DirectoryFiles.lockedPassword : "*"
        return
            "\(user.loginName):\(password):\(user.uid):\(user.uid):\(gecos(user.displayName)):\(home)/\(user.loginName):\(shell)\n"
    }

    /// The comment field: no separator of the passwd format (`:`, a line), no sub-field separator (`,`).
    static func gecos(_ name: String) -> String {
        String(
            String.UnicodeScalarView(name.unicodeScalars.filter { $0 != ":" && $0 != "," && DisplayText.isSafe($0) }))
    }

    /// The names and numbers (field 3) of a passwd or group file; NIS's `+` and `-` lines and broken lines are skipped.
    static func entries(of path: String) throws -> [(name: String, id: Int64)] {
        guard let data = try AtomicFile.read(path, limit: localFileLimit) else { return [] }
        return DirectoryFiles.entries(in: String(decoding: data, as: UTF8.self))
    }
}
