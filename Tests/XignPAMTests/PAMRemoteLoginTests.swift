import Foundation
import Testing
import XignCore
import XignProtocol
import XignTestSupport

/// The machine's own key proves presence only at the machine: over the network it is there whoever connects, so a
/// remote login never uses it (docs/security.md, "Which factors a login has").
@Suite struct PAMRemoteLoginTests {
    /// A utmp file with one live session on `line`, from `host` ("" for a console).
    static func utmp(line: String, host: String, in directory: TemporaryDirectory) throws -> String {
        var record = utmpx()
        record.ut_type = Int16(USER_PROCESS)
        record.ut_pid = getpid()
        func fill<T>(_ field: inout T, _ text: String) {
            withUnsafeMutableBytes(of: &field) { raw in raw.copyBytes(from: Array(text.utf8.prefix(raw.count - 1))) }
        }
        fill(&record.ut_line, line)
        fill(&record.ut_user, "alice")
        fill(&record.ut_host, host)
        let path = directory.file("utmp-\(line.replacingOccurrences(of: "/", with: "-"))")
        try writeTestFile(path, withUnsafeBytes(of: record) { Data($0) }, mode: 0o644)
        return path
    }

    @Test func aLoginFromAnotherHostIsRefusedBeforeAnyPINAndChargesNothing() throws {
        let fixture = try PAMFixture()
        let remote = try fixture.login(answers: [], items: ["rhost=203.0.113.9"])
        #expect(remote.code == PAMCode.authError, "\(remote.output)")
        #expect(
            remote.conversation
                == "[ERROR_MSG] XignIn: this machine's key is only for logins at this machine, and this login comes over the network. Log in another way, or ask your administrator.",
            "no PIN prompt: \(remote.conversation)")
        let wrong = try fixture.login(answers: [], items: ["rhost=203.0.113.9"])
        #expect(wrong.code == PAMCode.authError)
        #expect(try fixture.failedAttempts("alice@example.org") == 0, "no PIN typed remotely is charged")
        // Honest control: the same login at the machine asks for the PIN and logs in.
        let local = try fixture.login()
        #expect(local.code == PAMCode.success, "\(local.output)")
        #expect(local.conversation.hasPrefix("[PROMPT_ECHO_OFF] XignIn PIN for"))
    }

    static let overTheNetwork = "comes over the network"

    /// G3: local needs positive evidence. The harness stands in for sudo's PAM call (as root, service sudo); the
    /// cgroup its process runs in is real, logind's records of the sessions are recorded (no logind runs here).
    @Test func sudoIsLocalOnlyInTheActiveSessionOfASeatWithoutARemoteOne() throws {
        let fixture = try PAMFixture()
        func sudo(_ wrapper: [String], _ why: Comment) throws {
            let login = try fixture.login(service: "sudo", answers: [], wrapper: wrapper)
            #expect(login.code == PAMCode.authError, why)
            #expect(login.conversation.contains(Self.overTheNetwork), "\(why): \(login.conversation)")
        }
        try sudo([], "no logind session at all (a machine without logind, or a process outside every session)")
        try sudo(try fixture.logind.inService("cron.service"), "a cron or at job without a session")
        try fixture.logind.addSession("c3", user: "root", seat: nil)
        try sudo(try fixture.logind.inSession("c3"), "a job in a session of its own (cron's PAM session), on no seat")
        try fixture.logind.addSession("c4", user: "root", active: false)
        try sudo(try fixture.logind.inSession("c4"), "a seat session that is not the active one")
        // Control: the active session of the seat, and the desktop's terminals in the user's service manager.
        try fixture.logind.addSession("c5", user: "root")
        #expect(try fixture.login(service: "sudo", wrapper: try fixture.logind.inSession("c5")).code == PAMCode.success)
        #expect(
            try fixture.login(service: "sudo", wrapper: try fixture.logind.inUserManager("root")).code
                == PAMCode.success)
        // The same user logs in over SSH: a console tmux attached from there, or systemd-run --user --pty, runs in
        // the seat session or the service manager, and either can be driven from the network.
        try fixture.logind.addSession("c6", user: "root", seat: nil, remoteHost: "198.51.100.4")
        try sudo(try fixture.logind.inSession("c5"), "a console tmux attached from SSH")
        try sudo(try fixture.logind.inUserManager("root"), "systemd-run --user --pty from SSH")
        try sudo(try fixture.logind.inSession("c6"), "the SSH session itself")
    }

    /// The real sudo, run by its user in a pseudo-terminal: from `systemd-run --user --pty` while the user is logged in
    /// over SSH (the user's service manager), and from a job in no session, it does not use this machine's key; in a
    /// terminal of the seat's session it does.
    @Test func theRealSudoUsesTheKeyOnlyAtTheSeat() throws {
        let user = try SSHServer.user.get()
        let fixture = try PAMFixture(users: [user])
        chmod(fixture.directory.path, 0o711)
        let pam =
            "auth required \(try PAMFixture.module) config=\(fixture.configPath) timeout=5\naccount required pam_permit.so\n"
        try RealSudo.withService(for: user, pamLines: pam, defaults: ["passwd_tries=1"]) {
            // Control: a terminal of the seat's session.
            let seat = try RealSudo.run(as: user, in: try fixture.atSeat(user))
            _ = try seat.expect("PIN for")
            seat.send("24680\n")
            _ = try seat.expect("\nroot")
            #expect(try seat.wait() == 0)

            try fixture.logind.addSession("ssh1", user: user, seat: nil, remoteHost: "198.51.100.7")
            // H2: someone else holds the seat (the greeter, or a colleague's turn), and the user, over SSH, makes
            // cgroups below their own service manager (systemd delegates that subtree to them) named as that session's
            // scope, or as that person's service manager, and moves a shell there. systemd reads both as the user's
            // own service manager, whose user is not at the seat.
            try fixture.logind.addSession("g1", user: "nobody")
            let seatHolder = fixture.logind.sessionId("g1")
            let elsewhere = [
                (try fixture.logind.inUserManager(user), "systemd-run --user --pty from SSH"),
                (try fixture.logind.inService("atd.service"), "an at job"),
                (
                    try fixture.logind.belowUserManager(user, "app.slice/session-\(seatHolder).scope"),
                    "a cgroup the user made, named as the seat holder's session scope"
                ),
                (
                    try fixture.logind.belowUserManager(user, "app.slice/user@65534.service"),
                    "a cgroup the user made, named as the seat holder's service manager"
                ),
            ]
            for (prefix, what) in elsewhere {
                let refused = try RealSudo.run(as: user, in: prefix)
                #expect(try refused.wait() != 0, "\(what): \(refused.output)")
                // sudo passes PAM_SILENT (its pam_silent default), so the refusal shows as no PIN asked.
                #expect(
                    !refused.output.contains("PIN for") && refused.output.contains("1 incorrect password attempt"),
                    "\(what): \(refused.output)")
            }
        }
        #expect(try fixture.failedAttempts("\(user)@example.org") == 0)
    }

    /// Before a session exists, the console program is the evidence: login on a virtual terminal, not on a pseudo-terminal
    /// (telnet, a terminal emulator); sudo inside a terminal utmp records as remote says where it comes from.
    @Test func loginIsLocalOnAVirtualTerminalOnly() throws {
        let fixture = try PAMFixture()
        #expect(try fixture.login(items: ["tty=/dev/tty2"]).code == PAMCode.success, "control: getty's login on tty2")
        for tty in ["/dev/pts/4", "ttyS0", "tty0", "tty64"] {
            let login = try fixture.login(answers: [], items: ["tty=\(tty)"])
            #expect(
                login.code == PAMCode.authError && login.conversation.contains(Self.overTheNetwork),
                "\(tty): \(login.output)")
        }
        let records = TemporaryDirectory()
        try fixture.writeConfig(utmp: try Self.utmp(line: "pts/7", host: "198.51.100.4", in: records))
        let insideSSH = try fixture.login(service: "sudo", answers: [], items: ["tty=/dev/pts/7"])
        #expect(insideSSH.code == PAMCode.authError)
        #expect(
            insideSSH.output.contains("198.51.100.4") || insideSSH.conversation.contains(Self.overTheNetwork),
            "\(insideSSH.output)")
    }

    @Test func theAdministratorsChoicesForRemoteLogins() throws {
        let fixture = try PAMFixture()
        // The module's PAM_IGNORE leaves the decision to the next line (here one that lets everyone in), silently.
        try fixture.service("login", arguments: "timeout=3 remote=ignore", then: "auth required pam_permit.so")
        let ignored = try fixture.login(answers: [], items: ["rhost=203.0.113.9"])
        #expect(ignored.code == PAMCode.success && ignored.conversation.isEmpty, "\(ignored.output)")
        try fixture.service("login", arguments: "timeout=3", then: "auth required pam_permit.so")
        #expect(
            try fixture.login(answers: [], items: ["rhost=203.0.113.9"]).code == PAMCode.authError,
            "honest control: the default refuses")
        try fixture.service("login", arguments: "timeout=3 remote=pin-only")
        let pinOnly = try fixture.login(items: ["rhost=203.0.113.9"])
        #expect(pinOnly.code == PAMCode.success, "an explicit opt-in logs in with the PIN: \(pinOnly.output)")
        try fixture.service("login", arguments: "timeout=3 remote=sometimes")
        #expect(
            try fixture.login(answers: [], items: ["rhost=203.0.113.9"]).code == PAMCode.serviceError,
            "a value it does not know is a config error")
    }

    @Test func modeAutoSendsARemoteLoginToConfirmationEvenWhereTheUserIsEnrolled() throws {
        let fixture = try PAMFixture()
        try fixture.manager.giveLogin("alice@example.org", "alice")
        try fixture.joinAsHost()
        try fixture.service("login", arguments: "timeout=3 mode=auto timeout_total=10")
        let remote = try fixture.startLogin(answers: [], items: ["rhost=203.0.113.9"])
        let text = try waitForOutput(of: remote, containing: "type the code")
        #expect(!text.contains("PIN"), "a confirmation, not a PIN prompt: \(text)")
        remote.stop()
        // Honest control: at the machine, mode=auto uses the enrolment.
        let local = try fixture.login()
        #expect(
            local.code == PAMCode.success && local.conversation.hasPrefix("[PROMPT_ECHO_OFF] XignIn PIN for"),
            "\(local.output)")
    }

    func waitForOutput(of child: ChildProcess, containing text: String) throws -> String {
        var output = ""
        guard
            try waitUntil(
                seconds: 20,
                {
                    output = (try? String(contentsOfFile: child.stdoutPath, encoding: .utf8)) ?? ""
                    return output.contains(text)
                })
        else { throw TestFailure("no '\(text)' in: \(output)") }
        return output
    }
}

/// Which enrolment a PAM user selects, and what survives an administrator's unlock.
@Suite struct PAMUserAndLockTests {
    /// "zoë" with ë as one scalar (NFC) and as e plus a combining diaeresis (NFD): two Unix names.
    @Test func userNamesAreComparedAsBytes() throws {
        let fixture = try PAMFixture(users: [])
        let composed = "zo\u{00EB}", decomposed = "zoe\u{0308}"
        #expect(composed == decomposed, "Swift's == would take one for the other")
        try fixture.enrol(localUser: composed, email: "zoe@example.org")
        #expect(try fixture.login(composed).code == PAMCode.success, "honest control: the enrolled name logs in")
        let other = try fixture.login(decomposed, answers: [])
        #expect(other.code == PAMCode.userUnknown && other.conversation.isEmpty, "\(other.output)")
        // A name that is not UTF-8 would decode with replacement characters; it is refused outright.
        let invalid = try fixture.login("hex:7a6fff", answers: [])
        #expect(invalid.code == PAMCode.authError && invalid.conversation.isEmpty, "\(invalid.output)")
    }

    @Test func anAdministratorsUnlockOfAPermanentLockBringsTheNextLoginBack() throws {
        let fixture = try PAMFixture()
        var login = try fixture.login(answers: ["13570"])
        // The test manager locks for good at the fourth failure; the waits in between are short.
        while login.code != PAMCode.maxTries {
            #expect(login.code == PAMCode.authError, "\(login.output)")
            Thread.sleep(forTimeInterval: 5.2)
            login = try fixture.login(answers: ["13570"])
        }
        #expect(login.conversation.contains("locked permanently"), "\(login.conversation)")
        let locked = try fixture.login(answers: [])
        #expect(locked.code == PAMCode.maxTries, "the right PIN during the lock: \(locked.output)")
        let id = try fixture.activation("alice@example.org")["id"] as? String ?? ""
        let unlock = try fixture.manager.admin(["unlock", id])
        #expect(unlock.status == 0, "\(unlock.stderr)")
        let after = try fixture.login()
        #expect(after.code == PAMCode.success, "the machine asks the manager again: \(after.output)")
    }
}

@Suite struct PAMSystemAccountTests {
    /// Login names are the administrator's to give; as a second line, a host does not confirm root or daemons.
    @Test func aHostDoesNotConfirmRootUnlessItsConfigSaysSo() throws {
        let fixture = try ConfirmationFixture(moduleArguments: "mode=confirm timeout=5 timeout_total=10")
        let root = try fixture.laptop.login("root", answers: [])
        #expect(root.code == PAMCode.authError, "\(root.output)")
        #expect(
            root.conversation == "[ERROR_MSG] XignIn: logins to root are not confirmed on this host.",
            "\(root.conversation)")
        // Honest control: with the host's consent the manager is asked, which knows no account named root.
        try writeTestFile(
            fixture.serverConfig,
            Data(
                (try String(contentsOfFile: fixture.serverConfig, encoding: .utf8)
                    + "[pam]\nconfirm_system_accounts = yes\n").utf8))
        #expect(try fixture.laptop.login("root", answers: []).code == PAMCode.userUnknown)
    }
}
