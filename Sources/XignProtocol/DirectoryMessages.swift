import FoundationEssentials

// The user directory: the accounts that may log in to a host, with the uid, gid and local groups the manager gave
// them, so every host names a person with the same numbers. docs/protocol.md, "The user directory".

extension APIPath {
    /// A host fetches its directory (host-signed over a challenge from /v1/hosts/challenges).
    public static let hostDirectory = "/v1/hosts/directory"
}

extension SignedAnswerType {
    public static let hostDirectory = "xign-host-directory+jwt"
}

extension WireLimit {
    /// Accounts in one host's directory, and the local groups one account is given on a host.
    public static let directoryUsers = 50_000
    public static let localGroups = 32
    /// PAM services a host's sudo policies name.
    public static let sudoPolicies = 32
    /// The largest directory answer a host reads (a full one is about 150 bytes per account, signed).
    public static let directoryBytes = 12 * 1024 * 1024
}

/// Where a host keeps its user directory: the cache libnss_xign reads (`/etc`'s formats) and the socket for misses.
/// The module has the same paths compiled in (`nss/nss_xign.c`).
public enum DirectoryFiles {
    public static let directory = "/var/lib/xign-nss"
    public static let passwd = "passwd", group = "group", memberships = "memberships", socket = "socket"
    /// Until when the cache serves (seconds since 1970, one line): `[directory] keep` after xignd last heard from the
    /// manager.
    public static let validUntil = "valid-until"
    /// When the manager last answered (seconds since 1970, one line): how old what the cache says is.
    public static let answeredAt = "answered-at"
    /// The host's sudo policies, a line `SERVICE POLICY` each (`*` for every other service).
    public static let sudoPolicies = "sudo-policies"
    /// A locked account's password field in `passwd`, as `passwd -l` marks one.
    public static let lockedPassword = "!"

    /// One account as the cache serves it.
    public struct Entry: Equatable, Sendable {
        public var name: String
        public var id: Int64
        public var locked: Bool
    }

    /// The users a host's cache in `directory` serves; none when the cache is missing or not root's alone.
    public static func served(in directory: String = Self.directory) -> [(name: String, id: Int64)] {
        accounts(in: directory).map { ($0.name, $0.id) }
    }

    /// As `served(in:)`, with each account's lock.
    public static func accounts(in directory: String = Self.directory) -> [Entry] {
        guard let data = try? AtomicFile.readTrusted(directory + "/" + passwd, limit: 16 << 20) else { return [] }
        return records(in: String(decoding: data, as: UTF8.self))
    }

    /// When the manager last answered the host's xignd, or nil (no cache, or one that is not root's alone).
    public static func answeredAt(in directory: String = Self.directory) -> Int64? {
        guard let data = try? AtomicFile.readTrusted(directory + "/" + answeredAt, limit: 64) else { return nil }
        return Int64(String(decoding: data.prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self))
    }

    /// The host's sudo policies by PAM service, as the manager last said; none (every service fresh) without a cache.
    public static func policies(in directory: String = Self.directory) -> [String: SudoPolicy] {
        guard let data = try? AtomicFile.readTrusted(directory + "/" + sudoPolicies, limit: 64 * 1024) else {
            return [:]
        }
        var table: [String: SudoPolicy] = [:]
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            let fields = line.split(separator: " ")
            if fields.count == 2 { table[String(fields[0])] = SudoPolicy(rawValue: String(fields[1])) ?? .fresh }
        }
        return table
    }

    /// The login names and uids in a passwd file's text; NIS's `+` and `-` lines and broken lines are skipped.
    public static func entries(in text: String) -> [(name: String, id: Int64)] {
        records(in: text).map { ($0.name, $0.id) }
    }

    /// As `entries(in:)`, with the lock. Split by bytes, as libc reads the file: as Characters, a `:` or `\n` with a
    /// combining mark after it, or a `\r\n`, is one Character and no separator.
    static func records(in text: String) -> [Entry] {
        text.utf8.split(separator: UInt8(ascii: "\n")).compactMap { line in
            let fields = line.split(separator: UInt8(ascii: ":"), maxSplits: 3, omittingEmptySubsequences: false)
            guard fields.count >= 3, let first = fields[0].first, first != UInt8(ascii: "+"),
                first != UInt8(ascii: "-"),
                let id = Int64(String(decoding: fields[2], as: UTF8.self))
            else { return nil }
            return Entry(
                name: String(decoding: fields[0], as: UTF8.self), id: id,
                locked: fields[1].elementsEqual(lockedPassword.utf8))
        }
    }
}

/// The numbers a manager hands out: above every range Debian, systemd and user namespaces use by default (see
/// docs/design.md, "Users on every machine"), below 2^31 because some programs keep a uid in a signed int.
public enum UnixIdRange {
    public static let allowed: ClosedRange<Int64> = 65_536...2_147_483_646
    /// 2001000000 to 0x7FFDFFFF: past SSSD's default id-mapping range (200000 to 2000200000, `ldap_idmap_range_*`)
    /// and the container range (524288 to 1879048191), before systemd's foreign range (0x7FFE0000). Before the review
    /// of late November 2026 it started at 0x70000000, inside SSSD's; numbers given then stay.
    public static let standard: ClosedRange<Int64> = 2_001_000_000...2_147_352_575
}

/// The whole directory, or (a lookup the host's cache missed) only the account with `loginName` or `uid`.
public struct HostDirectoryRequest: Codable, Equatable, Sendable {
    public var hostId: String
    public var challenge: String
    public var nonce: String
    public var loginName: String?
    public var uid: Int64?

    public init(hostId: String, challenge: String, nonce: String, loginName: String? = nil, uid: Int64? = nil) {
        self.hostId = hostId
        self.challenge = challenge
        self.nonce = nonce
        self.loginName = loginName
        self.uid = uid
    }
}

/// One account as a host serves it: its login name, its uid (its private group has the same number as gid), the
/// name people read, and the host's local groups (`sudo`, `docker`, ...) its host groups map to.
///
/// A locked account stays in the directory, so its files keep their owner's name, but with no local group, and the
/// host's account phase refuses it whatever proved the person (docs/design.md, "The account phase").
public struct DirectoryUser: Codable, Equatable, Sendable {
    public var loginName: String
    public var uid: Int64
    public var displayName: String
    public var localGroups: [String]
    public var locked: Bool

    public init(loginName: String, uid: Int64, displayName: String, localGroups: [String], locked: Bool = false) {
        self.loginName = loginName
        self.uid = uid
        self.displayName = displayName
        self.localGroups = localGroups
        self.locked = locked
    }

    enum CodingKeys: String, CodingKey {
        case loginName, uid, displayName, localGroups, locked
    }

    /// A manager from before locks reached hosts sends no `locked`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        loginName = try container.decode(String.self, forKey: .loginName)
        uid = try container.decode(Int64.self, forKey: .uid)
        displayName = try container.decode(String.self, forKey: .displayName)
        localGroups = try container.decode([String].self, forKey: .localGroups)
        locked = try container.decodeIfPresent(Bool.self, forKey: .locked) ?? false
    }
}

/// The signed directory of one host, bound to the host's nonce.
public struct HostDirectory: Codable, Equatable, Sendable {
    public var nonce: String
    public var hostId: String
    public var issuedAt: Int64
    public var users: [DirectoryUser]
    /// What a sudo in an approved session needs here, by PAM service (`*`: every other), the strictest of the host's
    /// groups; a service not listed is `fresh`.
    public var sudoPolicies: [String: SudoPolicy]

    public init(
        nonce: String, hostId: String, issuedAt: Int64, users: [DirectoryUser], sudoPolicies: [String: SudoPolicy] = [:]
    ) {
        self.nonce = nonce
        self.hostId = hostId
        self.issuedAt = issuedAt
        self.users = users
        self.sudoPolicies = sudoPolicies
    }

    enum CodingKeys: String, CodingKey {
        case nonce, hostId, issuedAt, users, sudoPolicies
    }

    /// A manager from before session covers sends no `sudoPolicies`: every service is fresh.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        nonce = try container.decode(String.self, forKey: .nonce)
        hostId = try container.decode(String.self, forKey: .hostId)
        issuedAt = try container.decode(Int64.self, forKey: .issuedAt)
        users = try container.decode([DirectoryUser].self, forKey: .users)
        // A policy this host does not know (a newer manager's) counts as the strictest.
        let policies = try container.decodeIfPresent([String: String].self, forKey: .sudoPolicies) ?? [:]
        sudoPolicies = policies.mapValues { SudoPolicy(rawValue: $0) ?? .fresh }
    }
}

/// A local group's name as `groupadd` accepts it on Debian; the manager's own group names are host groups.
public enum LocalGroupName {
    public static func isValid(_ name: String) -> Bool {
        LoginNameValidator.validate(name) == .valid
    }

    /// Groups that give what only root has (root's files, raw disks, kernel memory, password hashes): the manager maps
    /// no host group to one, and no host grants one (docs/security.md, H5).
    public static let rootEquivalent: Set<String> = ["root", "disk", "kmem", "shadow"]
}

extension HostDirectoryRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.plainIdentifier("hostId", hostId)
        try Limit.text("challenge", challenge, maximum: WireLimit.nonce)
        try Limit.text("nonce", nonce, maximum: WireLimit.nonce)
        try Limit.require(loginName == nil || uid == nil, "uid", "may not come with loginName")
        try Limit.require(
            loginName.map { LoginNameValidator.validate($0) == .valid } ?? true, "loginName", "is not a login name")
        try Limit.require(uid.map(UnixIdRange.allowed.contains) ?? true, "uid", "is outside the manager's numbers")
    }
}

extension DirectoryUser: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.require(LoginNameValidator.validate(loginName) == .valid, "loginName", "is not a login name")
        try Limit.require(
            UnixIdRange.allowed.contains(uid), "uid",
            "is outside \(UnixIdRange.allowed.lowerBound)...\(UnixIdRange.allowed.upperBound)")
        try Limit.line("displayName", displayName, maximum: WireLimit.attributeValue)
        try Limit.list("localGroups", localGroups, maximum: WireLimit.localGroups) { group throws(LimitViolation) in
            try Limit.require(LocalGroupName.isValid(group), "localGroups", "holds a name that is not a group name")
        }
        try Limit.require(!locked || localGroups.isEmpty, "localGroups", "are given to a locked account")
    }
}

extension HostDirectory: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.plainIdentifier("hostId", hostId)
        try Limit.list("users", users, maximum: WireLimit.directoryUsers) { user throws(LimitViolation) in
            try user.checkLimits()
        }
        try Limit.list("sudoPolicies", Array(sudoPolicies.keys), maximum: WireLimit.sudoPolicies) {
            service throws(LimitViolation) in
            try Limit.require(
                service == SudoPolicy.everyService || IdentifierValidator.isValid(service), "sudoPolicies",
                "names a PAM service that is not 1 to 64 printable ASCII characters without spaces")
        }
    }
}
