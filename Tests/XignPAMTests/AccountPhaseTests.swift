import Foundation
import Testing
import XignProtocol
import XignTestSupport

/// The host obeys the manager in PAM's account phase, whatever proved the person: real sshd on a joined host
/// (JoinedHost's mount namespace, its xignd and libnss_xign) takes nina's SSH key, which never meets PAM's auth phase
/// (`auth required pam_deny.so` here), and pam_xign's account line decides. The local user xigntest, with the same
/// key, is the control beside each refusal: never judged.
@Suite struct AccountPhaseTests {
    let manager: ManagerProcess
    let host: JoinedHost
    let server: SSHServer
    let services = TemporaryDirectory()
    let key: (privateKey: String, publicKey: String)
    /// nina's activation PIN, which `accounts add` printed.
    let pin: String

    /// nina is in host group web, which maps to sudo; web1 is in web. xignd refreshes hourly here, so what changes on
    /// the host between refreshes is the account phase's doing. `method`: sshd's AuthenticationMethods.
    init(method: String = "publickey", hostConfig: String = "") throws {
        manager = try ManagerProcess.servingBrowsers()
        pin = try Self.addNina(to: manager)
        host = try JoinedHost(
            "web1.example.org", groups: ["web"], manager: manager, refreshSeconds: 3600, config: hostConfig)
        let module = try PAMFixture.module
        _ = try services.write(
            "sshd",
            """
            auth required \(method.contains("keyboard-interactive") ? "\(module) config=\(host.configPath) mode=confirm timeout=60" : "pam_deny.so")
            account required \(module) config=\(host.configPath) timeout=10
            account required pam_permit.so
            session required pam_permit.so

            """, mode: 0o644)
        key = try SSHServer.clientKey(in: services)
        server = try SSHServer(
            pamServices: services.path, method: method, launcher: try host.launcher,
            authorizedKeys: ["nina": key.publicKey, try SSHServer.user.get(): key.publicKey])
    }

    /// Adds nina@example.org (login name nina) in host group web, which maps to the local group sudo, and then runs
    /// `more` admin commands; returns her activation PIN, which `accounts add` printed.
    static func addNina(to manager: ManagerProcess, then more: [[String]] = []) throws -> String {
        let added = try manager.admin(["accounts", "add", "nina@example.org", "--login-name", "nina"])
        guard added.status == 0, let pin = added.stdout.split(separator: " ").last else {
            throw TestFailure("accounts add: \(added.stderr)")
        }
        for arguments in [
            ["accounts", "set-host-groups", "nina@example.org", "web"], ["groups", "set-local", "web", "sudo"],
        ] + more {
            let result = try manager.admin(arguments)
            guard result.status == 0 else { throw TestFailure("\(arguments): \(result.stderr)") }
        }
        return pin.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `id` over SSH with the key alone: its output, or nil when sshd refused.
    func logInWithKey(_ user: String = "nina") throws -> String? {
        let ssh = try server.ssh(user, "id", identity: key.privateKey, methods: "publickey")
        let status = try ssh.wait(timeout: 30)
        return status == 0 ? ssh.output : nil
    }

    /// `id -Gn user` on the host: the groups initgroups gives a new login.
    func groups(_ user: String) throws -> String {
        try host.run(["/usr/bin/id", "-Gn", user]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func admin(_ arguments: [String]) throws {
        let result = try manager.admin(arguments)
        #expect(result.status == 0, "\(arguments): \(result.stderr)")
    }

    @Test func aLockEndsAnSSHKeyLoginAtOnceAndAnUnlockLetsItInAgain() throws {
        let local = try SSHServer.user.get()
        let uid = try #require(try host.getent("passwd", "nina")?.split(separator: ":").dropFirst(2).first)
        let before = try logInWithKey()
        #expect(before?.contains("uid=\(uid)(nina)") == true && before?.contains("27(sudo)") == true, "\(server.log)")
        #expect(try groups("nina") == "nina sudo")

        try admin(["accounts", "lock", "nina@example.org"])
        let locked = Date()
        #expect(try logInWithKey() == nil, "the key still logged in: \(server.log.suffix(1500))")
        print(
            "account lock: the first SSH key login after it was refused \(String(format: "%.2f", Date().timeIntervalSince(locked))) s after `accounts lock` returned"
        )
        #expect(server.log.contains("by PAM account configuration"), "\(server.log.suffix(1500))")
        // The account phase told xignd: nina stays a user (her files keep their owner), locked and without sudo.
        #expect(try host.getent("passwd", "nina")?.hasPrefix("nina:!:\(uid):") == true)
        #expect(try groups("nina") == "nina")
        #expect(try logInWithKey(local)?.contains("(\(local))") == true, "the control: a local user with the same key")

        try admin(["accounts", "unlock", "nina@example.org"])
        let after = try logInWithKey()
        #expect(after?.contains("27(sudo)") == true, "\(server.log.suffix(1500))")
        #expect(try host.getent("passwd", "nina")?.hasPrefix("nina:*:\(uid):") == true)
    }

    /// Host groups that leave this host out, and a deleted account: refused at the next login, before any refresh.
    @Test func anAccountNoLongerOnThisHostIsRefusedAtTheNextLogin() throws {
        #expect(try logInWithKey() != nil, "\(server.log.suffix(1500))")
        try admin(["accounts", "set-host-groups", "nina@example.org", "db"])
        #expect(try logInWithKey() == nil, "\(server.log.suffix(1500))")
        #expect(try host.getent("passwd", "nina") == nil, "xignd took the manager's word: nina is not served here")
        try admin(["accounts", "set-host-groups", "nina@example.org", "web"])
        #expect(try host.waitForUser("nina", present: true))
        #expect(try logInWithKey() != nil, "back in web: \(server.log.suffix(1500))")
    }

    /// The manager stopped: the cache decides within `[directory] offline_accounts` of its last answer (1 day by
    /// default), its lock always; past the bound the login waits for the manager.
    @Test func withTheManagerDownTheCacheDecidesWithinItsBound() throws {
        #expect(try logInWithKey() != nil, "\(server.log.suffix(1500))")
        try admin(["accounts", "lock", "nina@example.org"])
        #expect(try logInWithKey() == nil)
        try admin(["accounts", "unlock", "nina@example.org"])
        #expect(try logInWithKey() != nil)
        manager.stop()
        #expect(try logInWithKey() != nil, "the cache admits within its bound: \(server.log.suffix(1500))")
        let config = try String(contentsOfFile: host.configPath, encoding: .utf8)
        try writeTestFile(host.configPath, Data((config + "[directory]\noffline_accounts = 0\n").utf8))
        #expect(try logInWithKey() == nil, "past the bound: \(server.log.suffix(1500))")
        #expect(try logInWithKey(try SSHServer.user.get()) != nil, "the control: local users are not judged")
    }
}

/// The server setup the README gives: `AuthenticationMethods publickey,keyboard-interactive`, so the key is only the
/// first step, and the phone's approval the second.
@Suite struct KeyThenApprovalTests {
    @Test func theKeyAloneIsNotEnoughAndTheKeyWithThePhonesApprovalIs() throws {
        let setup = try AccountPhaseTests(method: "publickey,keyboard-interactive")
        let manager = setup.manager
        let pin = setup.pin
        let phone = Browser(in: manager.directory)
        let activated = try phone.personalize(try manager.activationAppLink(for: "nina@example.org"), pin: pin)
        #expect(activated.error.isEmpty, "\(activated)")

        #expect(try setup.logInWithKey() == nil, "the key alone: \(setup.server.log.suffix(1500))")
        #expect(setup.server.log.contains("Partial publickey"), "\(setup.server.log.suffix(1500))")

        let ssh = try setup.server.ssh(
            "nina", "echo in-as-$(id -un)", identity: setup.key.privateKey, methods: "publickey,keyboard-interactive")
        let (link, code) = try SSHLoginTests.scanned(ssh, in: setup.services)
        let approved = try phone.approve(link, code: code, pin: pin)
        #expect(approved.status == "Approved. The login to web1.example.org goes on.", "\(approved)")
        ssh.send("\r")
        try ssh.expect("in-as-nina")
        #expect(try ssh.wait() == 0, "\(ssh.output.suffix(1500))\n\(setup.server.log.suffix(1500))")
    }
}
