import Foundation
import Testing
import XignProtocol
import XignTestSupport

/// An approval covers its session, end to end: real sshd on a joined host (JoinedHost's namespace, its xignd and
/// libnss_xign), pam_loginuid and pam_xign in its session stack, the real sudo with pam_xign in confirm mode, and the
/// phone's approvals from Chromium. Under `sudo = session` the approved SSH login's sudo passes without a second
/// approval, and nothing outside that audit session does.
@Suite struct SessionCoverTests {
    let manager: ManagerProcess
    let host: JoinedHost
    let server: SSHServer
    let services = TemporaryDirectory()
    let key: (privateKey: String, publicKey: String)
    let phone: Browser
    let pin: String
    let uid: String

    init() throws { try self.init(policy: "session") }

    /// nina in host group web (sudo on its hosts), whose policy is `policy` for sudo. sshd takes a key alone or a
    /// confirmation alone, so a key's session is one no approval opened.
    init(policy: String, sudoers: String? = nil) throws {
        manager = try ManagerProcess.servingBrowsers()
        pin = try AccountPhaseTests.addNina(
            to: manager, then: [["groups", "set-sudo", "web", policy, "--service", "sudo"]])
        phone = Browser(in: manager.directory)
        let activated = try phone.personalize(try manager.activationAppLink(for: "nina@example.org"), pin: self.pin)
        guard activated.error.isEmpty else { throw TestFailure("personalize: \(activated)") }
        host = try JoinedHost("web1.example.org", groups: ["web"], manager: manager, refreshSeconds: 3600)
        let module = try PAMFixture.module
        _ = try services.write(
            "sshd",
            """
            auth required \(module) config=\(host.configPath) mode=confirm timeout=60
            account required pam_permit.so
            session required pam_loginuid.so
            session optional \(module) config=\(host.configPath) timeout=10
            session required pam_permit.so

            """, mode: 0o644)
        // sudo's own session has pam_xign too (as su's does through common-session): its close must not end the cover.
        let sudo = try host.directory.write(
            "sudo",
            """
            auth required \(module) config=\(host.configPath) mode=confirm timeout=60
            account required pam_permit.so
            session optional \(module) config=\(host.configPath) timeout=10
            session required pam_permit.so

            """, mode: 0o644)
        var mounts = ["mount --bind \(sudo) /etc/pam.d/sudo"]
        if let sudoers {
            let base = try String(contentsOfFile: "/etc/sudoers", encoding: .utf8)
            let file = try host.directory.write("sudoers", base + sudoers + "\n", mode: 0o440)
            mounts.append("mount --bind \(file) /etc/sudoers")
        }
        for line in mounts {
            let mounted = try host.run(["/bin/sh", "-c", line])
            guard mounted.status == 0 else { throw TestFailure("\(line): \(mounted.stderr)") }
        }
        key = try SSHServer.clientKey(in: services)
        server = try SSHServer(
            pamServices: services.path, method: "publickey keyboard-interactive", launcher: try host.launcher,
            authorizedKeys: ["nina": key.publicKey])
        uid = String(
            try #require(try host.getent("passwd", "nina")?.split(separator: ":").dropFirst(2).first))
    }

    /// An SSH login of nina's that she approves on the phone, running `command` in a terminal.
    func approvedLogin(_ command: String) throws -> PseudoTerminal {
        let ssh = try server.ssh("nina", command, terminal: true, methods: "keyboard-interactive")
        let (link, code) = try SSHLoginTests.scanned(ssh, in: services)
        let approved = try phone.approve(link, code: code, pin: pin)
        guard approved.status == "Approved. The login to web1.example.org goes on." else {
            throw TestFailure("the approval: \(approved)")
        }
        ssh.send("\r")
        return ssh
    }

    /// Approves the `number`th approval the terminal shows (1: the login's) from its link, as the phone's user would.
    func approveShown(_ terminal: PseudoTerminal, number: Int) throws {
        var shown: (link: String, code: String)?
        _ = try waitUntil(seconds: 30) {
            let parts = terminal.output.components(separatedBy: "type the code ")
            guard parts.count > number, let open = parts[number - 1].range(of: "open ", options: .backwards) else {
                return false
            }
            let link = parts[number - 1][open.upperBound...].prefix { $0 != ")" }
            shown = (String(link), String(parts[number].prefix(6)))
            return true
        }
        let (link, code) = try #require(shown, "no approval \(number) in: \(terminal.output.suffix(1500))")
        let approved = try phone.approve(link, code: code, pin: pin)
        #expect(approved.status.hasPrefix("Approved."), "\(approved)")
    }

    func codesShown(_ terminal: PseudoTerminal) -> Int {
        terminal.output.components(separatedBy: "type the code ").count - 1
    }

    /// The host's records of covered sessions.
    func records() throws -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: host.directory.file("state/covers"))) ?? []
    }

    func covers() throws -> String {
        try manager.admin(["accounts", "covers", "nina@example.org"]).stdout
    }

    @Test func sudoInTheApprovedSessionPassesAndNowhereElse() throws {
        // Inside the session, another user's sudo (the local user, through nina's covered sudo) is not covered: the
        // manager knows no account of that name, so it ends without an approval.
        let local = try SSHServer.user.get()
        let ssh = try approvedLogin(
            "s=$(date +%s%N); sudo -k id -un; e=$(date +%s%N); echo step-1 covered-ms=$(( (e - s) / 1000000 )); sudo -k -u \(local) sudo -k id -un; echo other-user=$?; read a; sudo -k id -un; echo step-2; read b; exit 0"
        )
        try ssh.expect("step-1")
        try ssh.expect("other-user=")
        #expect(!ssh.output.contains("other-user=0"), "another user's sudo was covered: \(ssh.output.suffix(1500))")
        #expect(codesShown(ssh) == 1, "sudo asked again in the approved session: \(ssh.output.suffix(1500))")
        #expect(ssh.output.contains("root\r\nstep-1"), "\(ssh.output.suffix(1500))\n\(server.log.suffix(1500))")
        let covered = try ssh.expect(matching: #"covered-ms=\d+\r"#)
        print(
            "session cover: the covered sudo (id -un) took \(covered.dropFirst(11).dropLast()) ms, the manager's check included"
        )
        let audit = try manager.admin(["audit"]).stdout
        #expect(audit.contains("sudo in session of approval"), "\(audit.suffix(2000))")
        #expect(try covers().contains("web1.example.org\tnina\taudit session"))
        #expect(try records().count == 1, "the host keeps the session's cover")

        // A key's session on the same host: no approval opened it, so its sudo asks.
        let keyed = try server.ssh(
            "nina", "sudo -k id -un", terminal: true, identity: key.privateKey, methods: "publickey")
        try keyed.expect("type the code")
        keyed.send("\u{3}")
        // A process in another audit session (as cron's pam_loginuid makes one), nina's, asks too.
        let other = try PseudoTerminal(
            try host.launcher[0],
            Array(try host.launcher.dropFirst()) + [
                "/bin/sh", "-c",
                "echo \(uid) > /proc/self/loginuid && exec setpriv --reuid=\(uid) --regid=\(uid) --init-groups sudo -k id -un",
            ])
        try other.expect("type the code")
        other.send("\u{3}")

        // An administrator ends the cover in the console: the next sudo in that session asks, and the phone's approval
        // lets it in.
        let console = ConsoleTests.browser(in: manager.directory, "end-cover")
        let adminPIN = try ConsoleTests.administrator(manager, console, "root@example.org")
        let signedIn = try console.consoleSignIn(manager.browserURL + "/console", pin: adminPIN)
        #expect(signedIn.error.isEmpty, "\(signedIn)")
        let ended = try console.consoleAct(
            "endCover", on: "nina@example.org", at: manager.browserURL + "/console/accounts")
        #expect(ended.status.hasPrefix("Ended the cover"), "\(ended)")
        ssh.send("\r")
        try approveShown(ssh, number: 2)
        try ssh.expect("step-2")
        #expect(ssh.output.contains("root\r\nstep-2"), "\(ssh.output.suffix(1500))")

        // The session closes: so does its cover, at the manager too.
        ssh.send("\r")
        #expect(try ssh.wait() == 0, "\(ssh.output.suffix(1500))\n\(server.log.suffix(1500))")
        #expect(try covers().contains("No session of nina@example.org is covered now."))
        #expect(try records().isEmpty, "the host forgot the cover with the session")
    }

    /// A lock ends every cover at once: the covered session's next sudo is refused.
    @Test func aLockEndsTheCover() throws {
        let ssh = try approvedLogin("sudo -k id -un; echo step-1; read a; sudo -k id -un; echo step-2=$?; exit 0")
        try ssh.expect("step-1")
        #expect(codesShown(ssh) == 1, "\(ssh.output.suffix(1500))")
        #expect(try manager.admin(["accounts", "lock", "nina@example.org"]).status == 0)
        #expect(try covers().contains("No session of nina@example.org is covered now."))
        ssh.send("\r")
        // sudo asks for silence (pam_silent), so the refusal has no words here: no approval is offered, and it fails.
        try ssh.expect("step-2=1")
        #expect(codesShown(ssh) == 1, "a locked account was offered an approval: \(ssh.output.suffix(1500))")
    }

}

/// Under `fresh` (the default), with the sudoers setting the README gives (`timestamp_timeout=0`), every sudo asks, even
/// right after one that passed; no cover is opened.
@Suite struct FreshSudoTests {
    @Test func everySudoAsksEvenRightAfterOneThatPassed() throws {
        let setup = try SessionCoverTests(policy: "fresh", sudoers: "Defaults timestamp_timeout=0")
        let ssh = try setup.approvedLogin("sudo id -un; echo step-1; sudo id -un; echo step-2; exit 0")
        try setup.approveShown(ssh, number: 2)
        try ssh.expect("step-1")
        try setup.approveShown(ssh, number: 3)
        try ssh.expect("step-2")
        #expect(setup.codesShown(ssh) == 3, "\(ssh.output.suffix(1500))")
        #expect(try setup.covers().contains("No session of nina@example.org is covered now."))
    }
}
