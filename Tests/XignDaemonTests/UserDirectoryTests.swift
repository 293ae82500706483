import Foundation
import Testing
import XignProtocol
import XignTestSupport

/// Users on every machine: the manager's accounts as users of two joined hosts, through xignd and libnss_xign, looked
/// up with glibc's own getent and id in each host's mount namespace.
@Suite(.serialized) struct UserDirectoryTests {
    let manager: ManagerProcess

    init() throws {
        manager = try ManagerProcess()
    }

    /// An account with a login name that may log in to hosts in `groups`; returns its uid as `admin accounts` says.
    func account(_ login: String, groups: [String]) throws -> Int64 {
        let email = "\(login)@example.org"
        for arguments in [
            ["accounts", "add", email, "--login-name", login], ["accounts", "set-host-groups", email] + groups,
        ] {
            let result = try manager.admin(arguments)
            guard result.status == 0 else { throw TestFailure("admin \(arguments): \(result.stderr)") }
        }
        let listed = try manager.admin(["accounts", "list", "--json"])
        let accounts = try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]] ?? []
        guard let uid = accounts.first(where: { $0["loginName"] as? String == login })?["uid"] as? Int64 else {
            throw TestFailure("no uid for \(login): \(listed.stdout)")
        }
        return uid
    }

    @Test func twoHostsNameOnePersonWithTheSameNumbersAndMappedGroups() throws {
        #expect(try manager.admin(["groups", "set-local", "web", "sudo", "nosuchgroup"]).status == 0)
        let alice = try account("alice", groups: ["web"])
        #expect(UnixIdRange.standard.contains(alice))
        // The hosts grant a group they lack: the manager's word cannot make it.
        let hosts = try ["web1", "web2"].map {
            try JoinedHost(
                $0, groups: ["web"], manager: manager, config: "[directory]\nlocal_groups = sudo, nosuchgroup\n")
        }
        let sudo = try #require(try hosts[0].getent("group", "sudo")?.split(separator: ":")[2])
        for host in hosts {
            #expect(try host.waitForUser("alice", present: true), "\(host.log)")
            #expect(try host.getent("passwd", "alice") == "alice:*:\(alice):\(alice)::/home/alice:/bin/bash")
            #expect(try host.getent("passwd", String(alice))?.hasPrefix("alice:") == true)
            #expect(try host.getent("group", String(alice)) == "alice:*:\(alice):")
            #expect(try host.getent("group", "alice") == nil, "a private group by its number only")
            let id = try host.run(["/usr/bin/id", "alice"])
            #expect(id.stdout == "uid=\(alice)(alice) gid=\(alice)(alice) groups=\(alice)(alice),\(sudo)(sudo)\n")
            #expect(host.log.contains("local group nosuchgroup does not exist here"), "\(host.log)")
        }
        // Enumeration lists the account after the local users.
        let listed = try hosts[0].run(["/usr/bin/getent", "passwd"]).stdout
        #expect(listed.hasSuffix("alice:*:\(alice):\(alice)::/home/alice:/bin/bash\n"))

        // A person the hosts have never seen: the first lookup asks xignd, which asks the manager at once.
        let bob = try account("bob", groups: ["web"])
        #expect(try hosts[1].getent("passwd", "bob") == "bob:*:\(bob):\(bob)::/home/bob:/bin/bash", "\(hosts[1].log)")
        // Deleted, the account leaves every host at its next refresh; made again, it has a new number.
        #expect(try manager.admin(["accounts", "delete", "alice@example.org"]).status == 0)
        for host in hosts { #expect(try host.waitForUser("alice", present: false), "\(host.log)") }
        #expect(try hosts[0].getent("passwd", String(alice)) == nil)
        let again = try account("alice", groups: ["web"])
        #expect(again > bob && again != alice)
        #expect(try hosts[0].getent("passwd", "alice") == "alice:*:\(again):\(again)::/home/alice:/bin/bash")
        // Control: an account without the hosts' group is served on neither.
        _ = try account("carol", groups: ["db"])
        #expect(try hosts[0].getent("passwd", "carol") == nil)

        // The manager gone: the refresh fails, the log says so, and the cache keeps serving.
        manager.kill()
        let failed = try waitUntil(seconds: 20, every: 200_000) {
            hosts[1].log.contains("the user directory was not refreshed, the cache stays as it was")
        }
        #expect(failed, "\(hosts[1].log)")
        #expect(try hosts[1].getent("passwd", "bob") != nil)
        #expect(try hosts[1].getent("passwd", "nobody-knows") == nil)

        // What the host's administrator sees: whom it serves, and doctor's checks (control: no home line).
        let setup = try Products.path("xign-setup")
        let served = try hosts[0].run([setup, "host", "list", "--config", hosts[0].configPath]).stdout
        #expect(served.contains("  bob  uid \(bob)\n") && served.contains("  alice  uid \(again)\n"), "\(served)")
        let pam = hosts[0].directory.file("pam.d")
        try FileManager.default.createDirectory(atPath: pam, withIntermediateDirectories: false)
        func doctor() throws -> [String: String] {
            let result = try hosts[0].run([
                setup, "doctor", "--json", "--config", hosts[0].configPath, "--pam-dir", pam,
            ])
            let json = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
            let items = json?["items"] as? [[String: Any]] ?? []
            return Dictionary(
                items.map { ($0["name"] as? String ?? "", $0["status"] as? String ?? "") }, uniquingKeysWith: { $1 })
        }
        let without = try doctor()
        _ = try hosts[0].directory.write("pam.d/common-session", "session optional pam_mkhomedir.so\n", mode: 0o644)
        let with = try doctor()
        #expect(
            without["nsswitch"] == "ok" && without["directory"] == "ok" && without["homes"] == "warning", "\(without)")
        #expect(with["homes"] == "ok", "\(with)")
    }

    @Test func localFilesWinAndADeadDaemonNeverHangsALookup() throws {
        let alice = try account("alice", groups: ["web"])
        let bob = try account("bob", groups: ["web"])
        let host = try JoinedHost(
            "web1", groups: ["web"], manager: manager, localUsers: ["alice:x:4242:4242::/home/alice:/bin/sh"],
            refreshSeconds: 3600)
        // The local alice wins, and the manager's alice is served under neither her name nor her number.
        #expect(try host.waitForUser("bob", present: true), "\(host.log)")
        #expect(try host.getent("passwd", "alice") == "alice:x:4242:4242::/home/alice:/bin/sh")
        #expect(try host.getent("passwd", String(alice)) == nil)
        #expect(try host.getent("group", String(alice)) == nil)
        #expect(host.log.contains("not served, local users win: alice (uid \(alice))"), "\(host.log)")
        // Control: bob, who collides with nothing, is served by name and number.
        #expect(try host.getent("passwd", String(bob))?.hasPrefix("bob:*:\(bob):") == true)
        // A cache that others may write is not believed (someone could have added a user to it); control: mode 0644.
        let cache = host.directory.file("var/xign-nss/passwd")
        chmod(cache, 0o664)
        #expect(try host.getent("passwd", "bob") == nil)
        chmod(cache, 0o644)
        #expect(try host.getent("passwd", "bob") != nil)

        // xignd frozen: a cached user still resolves; a miss gives up within the module's second.
        host.signalDaemon(SIGSTOP)
        #expect(try host.getent("passwd", "bob") != nil)
        let frozen = try timed { try host.getent("passwd", "dave") }
        #expect(frozen.value == nil)
        // xignd gone: the refused connection answers at once.
        host.signalDaemon(SIGKILL)
        #expect(try host.getent("passwd", "bob") != nil)
        let dead = try timed { try host.getent("passwd", "dave") }
        #expect(dead.value == nil)
        print("a missed lookup took \(frozen.milliseconds) ms with xignd frozen, \(dead.milliseconds) ms with it dead")
        #expect(frozen.milliseconds < 5_000 && dead.milliseconds < 5_000, "no lookup hangs")
    }

    /// H5: names that shadow nothing. A private group is served by its number only, so `getent group NAME` finds none
    /// of the manager's (the name a package's postinst looks for); the host grants only the local groups its xign.conf
    /// lists (sudo by default; here adm too), and the manager maps no host group to root, disk, kmem or shadow; an
    /// account another source of the host names or numbers (extrausers here; SSSD or LDAP elsewhere) is not served.
    /// Controls beside each: the number, sudo and adm, an account no source has.
    @Test func namesShadowNothingOnTheHost() throws {
        for group in ["root", "disk", "shadow"] {
            let refused = try manager.admin(["groups", "set-local", "web", "sudo", group])
            #expect(refused.status != 0 && refused.stderr.contains("gives what only root has"), "\(refused.stderr)")
        }
        #expect(try manager.admin(["groups", "set-local", "web", "sudo", "adm", "audio"]).status == 0)
        let webops = try account("webops", groups: ["web"])
        let erin = try account("erin", groups: ["web"])
        let fred = try account("fred", groups: ["web"])
        let host = try JoinedHost(
            "web1", groups: ["web"], manager: manager, sources: ["extrausers"],
            varLib: [
                "extrausers/passwd": "erin:x:3100:3100::/home/erin:/bin/sh\n", "extrausers/group": "ops:x:\(fred):\n",
            ],
            config: "[directory]\nlocal_groups = sudo, adm\n")
        #expect(try host.waitForUser("webops", present: true), "\(host.log)")
        #expect(try host.getent("group", "webops") == nil, "not by its name")
        #expect(try host.getent("group", String(webops)) == "webops:*:\(webops):", "by its number")
        #expect(try host.run(["/usr/bin/getent", "group"]).stdout.contains("webops") == false, "nor in the list")
        func gid(_ group: String) throws -> String {
            String(try #require(try host.getent("group", group)?.split(separator: ":")[2]))
        }
        let (sudo, adm) = (try gid("sudo"), try gid("adm"))
        #expect(
            try host.run(["/usr/bin/id", "webops"]).stdout
                == "uid=\(webops)(webops) gid=\(webops)(webops) groups=\(webops)(webops),\(adm)(adm),\(sudo)(sudo)\n")
        #expect(host.log.contains("local group audio is not one this host grants"), "\(host.log)")
        // Another source has erin, and a group with fred's number: neither account is served.
        #expect(try host.getent("passwd", "erin") == "erin:x:3100:3100::/home/erin:/bin/sh")
        #expect(try host.getent("passwd", String(erin)) == nil && host.getent("passwd", String(fred)) == nil)
        #expect(host.log.contains("the host's source extrausers has a user or group named erin"), "\(host.log)")
        #expect(host.log.contains("the host's source extrausers has a user or group with the number \(fred)"))
    }

    /// The cache serves for `[directory] keep` after the manager last answered (before, a host that never reached its
    /// manager again served its last directory for ever): past that, nobody; in date, the accounts.
    @Test func theCacheServesForItsKeepAfterTheManagerLastAnswered() throws {
        _ = try account("bob", groups: ["web"])
        let host = try JoinedHost(
            "web1", groups: ["web"], manager: manager, refreshSeconds: 3600, config: "[directory]\nkeep = 2h\n")
        #expect(try host.waitForUser("bob", present: true), "\(host.log)")
        let file = host.cacheDirectory + "/valid-until"
        let written = Int64(
            try String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines))
        let now = Int64(Date().timeIntervalSince1970)
        #expect(written.map { abs($0 - (now + 7_200)) < 300 } == true, "\(written ?? -1) against \(now)")
        try writeTestFile(file, Data("\(now - 1)\n".utf8), mode: 0o644)
        #expect(try host.getent("passwd", "bob") == nil, "past its keep the cache serves nobody")
        try writeTestFile(file, Data("garbled\n".utf8), mode: 0o644)
        #expect(try host.getent("passwd", "bob") == nil, "nor when it cannot tell")
        try writeTestFile(file, Data("\(now + 600)\n".utf8), mode: 0o644)
        #expect(try host.getent("passwd", "bob") != nil, "control: in date")
    }

    /// How long `body` took, in milliseconds, with its value.
    func timed<T>(_ body: () throws -> T) rethrows -> (value: T, milliseconds: Int) {
        let start = DispatchTime.now().uptimeNanoseconds
        let value = try body()
        return (value, Int((DispatchTime.now().uptimeNanoseconds - start) / 1_000_000))
    }
}
