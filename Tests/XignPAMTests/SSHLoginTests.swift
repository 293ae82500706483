import Foundation
import Testing
import XignCore
import XignProtocol
import XignTestSupport

@Suite struct SSHLoginTests {
    func setUp(
        moduleArguments: String = "mode=confirm timeout=30", servingBrowsers: Bool = false
    ) throws -> (ConfirmationFixture, SSHServer, String) {
        let user = try SSHServer.user.get()
        let fixture = try ConfirmationFixture(moduleArguments: moduleArguments, servingBrowsers: servingBrowsers)
        try fixture.laptop.manager.giveLogin("alice@example.org", user)
        try fixture.service(
            "sshd", arguments: moduleArguments, then: "account required pam_permit.so\nsession required pam_permit.so")
        return (fixture, try SSHServer(pamServices: fixture.laptop.confdir), user)
    }

    /// The code and the QR code the ssh client shows, the QR code read by zbarimg. ssh puts "(user@host) " before the
    /// prompt, on the QR code's first line, which is quiet zone only.
    static func scanned(
        _ ssh: PseudoTerminal, in directory: TemporaryDirectory
    ) throws -> (qrCode: String, code: String) {
        let shown = try ssh.expect("Press Enter once approved:")
        let code = String(try ssh.expect(matching: #"type the code \d{6}"#).suffix(6))
        var lines = (shown.components(separatedBy: "XignIn: approve").first ?? "").replacingOccurrences(
            of: "\r", with: ""
        )
        .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard lines.count > 2 else { throw TestFailure("no QR code in: \(shown)") }
        lines[0] = String(repeating: " ", count: lines[1].count)
        return (
            try QRReader.decode(
                bitmap: try QRReader.bitmap(fromTerminalText: lines.joined(separator: "\n")), in: directory), code
        )
    }

    @Test func aUserApprovesOnTheEnrolledMachineAndIsLoggedInOverSSH() throws {
        let (fixture, server, user) = try setUp()
        let ssh = try server.ssh(user, "echo logged-in-as-$(id -un)")
        // What the terminal shows holds a QR code that decodes to the confirmation's link.
        let (decoded, code) = try Self.scanned(ssh, in: fixture.laptop.directory)
        #expect(ConfirmationPayload.confirmationId(in: decoded) != nil && decoded.contains("/C#"), "\(decoded)")
        let approval = try fixture.approve(code: code)
        #expect(approval.status == 0, "\(approval.stderr)")
        ssh.send("\r")
        try ssh.expect("logged-in-as-\(user)")
        #expect(try ssh.wait() == 0)
    }

    /// The QR code in the ssh client's terminal, read by zbarimg, opened in Chromium on a phone whose passkey holds
    /// alice's activation (moved there from the laptop with new activation data): code, PIN, and the command runs.
    @Test func aPhoneApprovesFromTheQRCodeTheSSHClientShows() throws {
        let (fixture, server, user) = try setUp(servingBrowsers: true)
        let manager = fixture.laptop.manager
        let activation = try #require(try manager.query("SELECT id FROM activations").first)
        #expect(try manager.admin(["reissue", activation]).status == 0)
        let phone = Browser(in: fixture.laptop.directory)
        let activated = try phone.personalize(try manager.activationAppLink(for: "alice@example.org"), pin: "24680")
        #expect(
            activated.error.isEmpty
                && activated["outcome"].hasPrefix("This activation is personalized on another device"), "\(activated)")

        let ssh = try server.ssh(user, "echo logged-in-as-$(id -un)")
        let (scanned, code) = try Self.scanned(ssh, in: fixture.laptop.directory)
        #expect(scanned.hasPrefix("HTTP://LOCALHOST:\(manager.port)/C#"), "a phone's camera opens it: \(scanned)")
        let approved = try phone.approve(scanned, code: code, pin: "24680")
        #expect(approved.status == "Approved. The login to web1.example.org goes on.", "\(approved)")
        #expect(
            approved["service"] == "sshd" && approved["login"] == user && approved["remote"].hasPrefix("127.0.0.1"),
            "\(approved)")
        ssh.send("\r")
        try ssh.expect("logged-in-as-\(user)")
        #expect(try ssh.wait() == 0)
    }

    @Test func aDenialEndsTheLoginWithOneLineAndNoShell() throws {
        let (fixture, server, user) = try setUp()
        let ssh = try server.ssh(user, "echo should-not-run")
        try ssh.expect("Press Enter once approved:")
        let denial = try ChildProcess(
            try Products.path("xign-setup"),
            ["approve", "--state-dir", fixture.laptop.state, "--user", "alice", "--deny", "--wait"],
            in: fixture.laptop.directory
        ).wait()
        #expect(denial.status == 0, "\(denial.stderr)")
        ssh.send("\r")
        try ssh.expect("the login was denied on your device")
        ssh.send("\r")
        #expect(try ssh.wait() != 0)
        #expect(!ssh.output.contains("should-not-run"))
    }

    /// With mode=local the key of the machine being logged into is there whoever connects: the PIN alone must not
    /// open a shell, and no PIN typed over SSH (or SSH password fed to the PIN prompt) is charged.
    @Test(arguments: ["keyboard-interactive", "password"]) func thePINAloneGivesNoShellOverSSH(method: String) throws {
        let user = try SSHServer.user.get()
        let fixture = try PAMFixture(users: [user])
        try fixture.service(
            "sshd", arguments: "timeout=5", then: "account required pam_permit.so\nsession required pam_permit.so")
        let server = try SSHServer(pamServices: fixture.confdir, method: method)
        for pin in ["24680", "13570"] {
            let ssh = try server.ssh(user, "echo shell-for-$(id -un)")
            if method == "password" {
                try ssh.expect("password:")
                ssh.send(pin + "\r")
            } else {
                // sshd's log says why a login ended without the module's words (CI saw that once, on a busy machine).
                do { try ssh.expect("only for logins at this machine") } catch {
                    throw TestFailure("\(error)\nsshd's log:\n\(server.log.suffix(3000))")
                }
                ssh.send("\r")
            }
            #expect(try ssh.wait() != 0)
            #expect(!ssh.output.contains("shell-for-"), "\(ssh.output)")
            #expect(!ssh.output.contains("PIN"), "no PIN was asked: \(ssh.output)")
        }
        #expect(try fixture.failedAttempts("\(user)@example.org") == 0)
        // Honest control: the same enrolment at the machine logs in with the PIN.
        try fixture.service("login", arguments: "timeout=5")
        #expect(try fixture.login(user).code == PAMCode.success)
    }

    @Test func modeAutoOverSSHAsksForConfirmationWhereTheUserIsEnrolled() throws {
        let user = try SSHServer.user.get()
        let fixture = try PAMFixture(users: [user])
        try fixture.manager.giveLogin("\(user)@example.org", user)
        try fixture.joinAsHost()
        try fixture.service(
            "sshd", arguments: "mode=auto timeout=5",
            then: "account required pam_permit.so\nsession required pam_permit.so")
        let server = try SSHServer(pamServices: fixture.confdir)
        let ssh = try server.ssh(user, "echo shell-for-$(id -un)")
        try ssh.expect("Press Enter once approved:")
        #expect(!ssh.output.contains("PIN"), "\(ssh.output)")
    }

    @Test func anExpiredAnUnknownAndAnUnreachableLoginEachEndAsDocumented() throws {
        let user = try SSHServer.user.get()
        let fixture = try ConfirmationFixture(
            managerConfig: ManagerProcess.testConfig + "\n[confirmation]\nlifetime = 5s\n")
        try fixture.service(
            "sshd", arguments: "mode=confirm timeout=5",
            then: "account required pam_permit.so\nsession required pam_permit.so")
        let server = try SSHServer(pamServices: fixture.laptop.confdir)
        // No account has this login name yet: no prompt, no approval asked for.
        let unknown = try server.ssh(user, "echo in-without-approval")
        #expect(try unknown.wait() != 0)
        #expect(
            !unknown.output.contains("Press Enter") && !unknown.output.contains("in-without-approval"),
            "\(unknown.output)")
        try fixture.laptop.manager.giveLogin("alice@example.org", user)
        // Nobody approves: Enter after the confirmation ran out gives one clear line.
        let late = try server.ssh(user, "true")
        try late.expect("Press Enter once approved:")
        Thread.sleep(forTimeInterval: 5.5)
        late.send("\r")
        try late.expect("the approval did not arrive in time; log in again")
        late.send("\r")
        #expect(try late.wait() != 0)
        // The manager is down: the user is told at once.
        fixture.laptop.manager.stop()
        let down = try server.ssh(user, "true")
        try down.expect("the identity manager cannot be reached")
        down.send("\r")
        #expect(try down.wait() != 0)
    }
}
