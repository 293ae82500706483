import Foundation
import Testing
import XignProtocol
import XignTestSupport

@testable import XignDaemon

/// H5, in the cache xignd writes: names reserved for system users and groups (the built-in list and the host's
/// sysusers.d) are not served, and an account joins only the local groups the host grants. `UserDirectoryTests` runs
/// the same on a joined host through glibc.
@Suite struct DirectoryCacheTests {
    static func user(_ name: String, _ uid: Int64, groups: [String] = []) -> DirectoryUser {
        DirectoryUser(loginName: name, uid: uid, displayName: name.capitalized, localGroups: groups)
    }

    @Test func reservedNamesAndTheHostsSysusersAreNotServed() throws {
        let directory = TemporaryDirectory()
        let sysusers = directory.file("sysusers.d")
        try FileManager.default.createDirectory(atPath: sysusers, withIntermediateDirectories: false)
        _ = try directory.write(
            "sysusers.d/lab.conf",
            "# a comment\nu svc-lab - \"Lab service\"\ng labgroup -\nm svc-lab labgroup\nr - 500-900\n")
        _ = try directory.write("passwd", "root:x:0:0:root:/root:/bin/bash\n")
        _ = try directory.write("group", "root:x:0:\nsudo:x:27:\ndocker:x:999:\n")
        let cache = DirectoryCache(
            directory: directory.file("cache"), localPasswd: directory.file("passwd"),
            localGroup: directory.file("group"), reservedNames: HostReservedNames.load(from: [sysusers]))
        let written = try cache.write([
            Self.user("svc-lab", 2_001_000_001), Self.user("labgroup", 2_001_000_002),
            Self.user("ubuntu", 2_001_000_003),
            Self.user("pi", 2_001_000_004), Self.user("alice", 2_001_000_005, groups: ["sudo", "docker"]),
        ])
        #expect(written.served.map(\.loginName) == ["alice"], "\(written)")
        #expect(written.collisions.count == 4 && written.collisions.allSatisfy { $0.contains("is reserved") })
        // Control: alice joins sudo, which the host grants by default, and not docker, which it does not.
        #expect(written.refusedGroups == ["docker"])
        let memberships = try String(contentsOfFile: directory.file("cache/memberships"), encoding: .utf8)
        #expect(memberships == "sudo:*:27:alice\n")
    }

    /// Each uid that asks has a budget of misses of its own: a user who spends theirs on made-up names leaves root's
    /// (sshd's, for the people logging in) whole. The manager is a stand-in here (a fetch that finds nobody, a model);
    /// UserDirectoryTests asks the real one.
    @Test func aUsersMissesAreTheirOwn() throws {
        let directory = TemporaryDirectory()
        let service = DirectoryService(
            cache: DirectoryCache(directory: directory.file("cache"), reservedNames: []),
            fetch: { _ in Self.answer([]) },
            missBurst: 3, missesPerSecond: 0.001, log: { _, _ in })
        service.refresh()
        let nobody: uid_t = 65534
        for index in 0..<3 { #expect(service.answer(.name("nosuch\(index)"), for: nobody) == .notFound) }
        #expect(service.answer(.name("gina"), for: nobody) == .unavailable, "nobody's budget is spent")
        #expect(service.answer(.name("gina"), for: 0) == .notFound, "root's is its own")
        #expect(service.answer(.id(2_001_000_009), for: 1000) == .notFound, "and so is another user's")
    }

    /// A locked account stays a user (its files keep their owner's name) with `!` for a password and no local group,
    /// even where a manager named some; the account beside it keeps its own.
    @Test func aLockedAccountIsMarkedAndJoinsNoGroup() throws {
        let directory = TemporaryDirectory()
        _ = try directory.write("passwd", "root:x:0:0:root:/root:/bin/bash\n")
        _ = try directory.write("group", "root:x:0:\nsudo:x:27:\n")
        let cache = DirectoryCache(
            directory: directory.file("cache"), localPasswd: directory.file("passwd"),
            localGroup: directory.file("group"), reservedNames: [])
        var nina = Self.user("nina", 2_001_000_001, groups: ["sudo"])
        nina.locked = true
        _ = try cache.write([nina, Self.user("omar", 2_001_000_002, groups: ["sudo"])], answeredAt: 1_800_000_000)
        let passwd = try String(contentsOfFile: directory.file("cache/passwd"), encoding: .utf8)
        #expect(passwd.hasPrefix("nina:!:2001000001:") && passwd.contains("\nomar:*:2001000002:"), "\(passwd)")
        #expect(try String(contentsOfFile: directory.file("cache/memberships"), encoding: .utf8) == "sudo:*:27:omar\n")
        #expect(
            DirectoryFiles.accounts(in: directory.file("cache")).map { "\($0.name) \($0.locked)" } == [
                "nina true", "omar false",
            ])
        #expect(DirectoryFiles.answeredAt(in: directory.file("cache")) == 1_800_000_000)
    }

    /// The manager's answer with `users`, as xignd's fetch returns it.
    static func answer(_ users: [DirectoryUser], sudoPolicies: [String: SudoPolicy] = [:]) -> HostDirectory {
        HostDirectory(nonce: "n", hostId: "h", issuedAt: 0, users: users, sudoPolicies: sudoPolicies)
    }

    /// The host's sudo policies go with the directory into the cache, where the PAM module reads them; a policy this
    /// host does not know (a newer manager's) reads as the strictest, and a manager that sends none leaves all fresh.
    @Test func theSudoPoliciesReachTheCache() throws {
        let directory = TemporaryDirectory()
        let service = DirectoryService(
            cache: DirectoryCache(directory: directory.file("cache"), reservedNames: []),
            fetch: { _ in Self.answer([], sudoPolicies: ["sudo": .session, "su": .fresh]) }, log: { _, _ in })
        service.refresh()
        let policies = DirectoryFiles.policies(in: directory.file("cache"))
        #expect(policies == ["sudo": .session, "su": .fresh])
        #expect(SudoPolicy.of("sudo", in: policies) == .session && SudoPolicy.of("pkexec", in: policies) == .fresh)
        let newer = #"{"nonce":"n","hostId":"h","issuedAt":0,"users":[],"sudoPolicies":{"*":"session","sudo":"pin"}}"#
        let decoded = try JSONDecoder().decode(HostDirectory.self, from: Data(newer.utf8))
        #expect(decoded.sudoPolicies == ["*": .session, "sudo": .fresh])
        let older = #"{"nonce":"n","hostId":"h","issuedAt":0,"users":[]}"#
        #expect(try JSONDecoder().decode(HostDirectory.self, from: Data(older.utf8)).sudoPolicies.isEmpty)
    }

    /// Only root's account phase has xignd take the manager's word about a served name: a user asking for a recheck
    /// is refused and the manager is not asked; root's recheck drops a name the manager no longer serves here.
    @Test func aRecheckIsRootsAlone() throws {
        let directory = TemporaryDirectory()
        let asked = Shared(0)
        let served = Shared(true)
        let service = DirectoryService(
            cache: DirectoryCache(directory: directory.file("cache"), reservedNames: []),
            fetch: { _ in
                asked.value += 1
                return Self.answer(served.value ? [Self.user("nina", 2_001_000_001)] : [])
            }, log: { _, _ in })
        service.refresh()
        #expect(service.answer(.name("nina"), for: 1000) == .found)
        served.value = false
        let before = asked.value
        #expect(service.answer(.recheck("nina"), for: 1000) == .unavailable)
        #expect(asked.value == before, "a user's recheck never reaches the manager")
        #expect(service.answer(.recheck("nina"), for: 0) == .notFound)
        #expect(DirectoryFiles.served(in: directory.file("cache")).isEmpty)
    }

    @Test func sysusersLinesNameUsersAndGroups() {
        #expect(
            HostReservedNames.declared(in: "u a 1 \"x\"\nu! b -\ng c -\nm d e\nr - 1-2\n\nbroken\n") == [
                "a", "b", "c", "d", "e",
            ])
    }
}

/// A value a Sendable closure and its test share.
final class Shared<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    var value: Value {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}
