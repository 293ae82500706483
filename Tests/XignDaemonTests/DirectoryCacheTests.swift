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
            cache: DirectoryCache(directory: directory.file("cache"), reservedNames: []), fetch: { _ in [] },
            missBurst: 3, missesPerSecond: 0.001, log: { _, _ in })
        service.refresh()
        let nobody: uid_t = 65534
        for index in 0..<3 { #expect(service.answer(.name("nosuch\(index)"), for: nobody) == .notFound) }
        #expect(service.answer(.name("gina"), for: nobody) == .unavailable, "nobody's budget is spent")
        #expect(service.answer(.name("gina"), for: 0) == .notFound, "root's is its own")
        #expect(service.answer(.id(2_001_000_009), for: 1000) == .notFound, "and so is another user's")
    }

    @Test func sysusersLinesNameUsersAndGroups() {
        #expect(
            HostReservedNames.declared(in: "u a 1 \"x\"\nu! b -\ng c -\nm d e\nr - 1-2\n\nbroken\n") == [
                "a", "b", "c", "d", "e",
            ])
    }
}
