import Foundation
import Testing
import XignCore
import XignProtocol
import XignTestSupport

/// `mode=confirm`: a server that holds no key of the user's (a host) asks the user to approve on an enrolled
/// machine; the approval runs the real `xign-setup approve` from the enrolled machine's own state directory.
final class ConfirmationFixture: @unchecked Sendable {
    /// The user's enrolled machine (alice's enrolment lives in `laptop.state`), and the manager.
    let laptop: PAMFixture
    /// The server, joined as a host, with the pam.d services.
    let server = TemporaryDirectory()
    let serverConfig: String

    /// The user enrolled on the laptop, and the login name the server asks for.
    let user: String

    init(
        managerConfig: String = ManagerProcess.testConfig, moduleArguments: String = "mode=confirm timeout=30",
        tpm: SoftwareTPM? = nil,
        user: String = "alice", servingBrowsers: Bool = false
    ) throws {
        self.user = user
        laptop = try PAMFixture(managerConfig: managerConfig, users: [user], tpm: tpm, servingBrowsers: servingBrowsers)
        try laptop.manager.giveLogin("\(user)@example.org", user)
        serverConfig = try server.write("xign.conf", "state_dir = \(server.file("state"))\n")
        try laptop.joinAsHost(stateDirectory: server.file("state"))
        try service("login", arguments: moduleArguments)
        try service("sshd", arguments: moduleArguments)
    }

    func service(_ name: String, arguments: String, then: String = "") throws {
        _ = try laptop.directory.write(
            "pam.d/\(name)", "auth required \(try PAMFixture.module) config=\(serverConfig) \(arguments)\n\(then)\n",
            mode: 0o644)
    }

    /// The code the module showed, once it has shown it.
    func code(of login: ChildProcess, timeout: Double = 20) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let text = (try? String(contentsOfFile: login.stdoutPath, encoding: .utf8)) ?? ""
            if let range = text.range(of: #"type the code (\d{6})"#, options: .regularExpression) {
                return String(text[range].suffix(6))
            }
            if login.poll() != nil { throw TestFailure("the login ended before showing a code: \(text)") }
            usleep(20_000)
        }
        throw TestFailure("no code shown within \(timeout) s")
    }

    /// `xign-setup approve` on the laptop, with the code and the PIN as lines.
    func approve(code: String, pin: String = "24680", extra: [String] = []) throws -> ChildProcess.Result {
        try ChildProcess(
            try Products.path("xign-setup"),
            [
                "approve", "--config", laptop.configPath, "--state-dir", laptop.state, "--user", user,
                "--pin-stdin", "--wait",
            ] + extra,
            stdin: "\(code)\n\(pin)\n", in: laptop.directory
        ).wait()
    }
}

@Suite struct PAMConfirmationTests {
    /// H5: the manager's account alice is not this server's own alice (another uid, made by hand): the login is refused
    /// before any confirmation exists, with what to do. Control: once the administrator lets the account be the hosts'
    /// local alice, the same login asks for the approval.
    @Test func aManagerAccountNamedLikeTheServersOwnUserIsNotThatUser() throws {
        let fixture = try ConfirmationFixture()
        #expect(
            try fixture.laptop.manager.admin(["accounts", "set-local-user", "alice@example.org", "no"]).status == 0)
        let refused = try fixture.laptop.login(answers: [])
        #expect(refused.code == PAMCode.authError, "\(refused.output)")
        #expect(
            refused.conversation
                == "[ERROR_MSG] XignIn: your account at the identity manager is not this server's user alice; ask your administrator.",
            "\(refused.conversation)")
        #expect(try fixture.laptop.manager.query("SELECT COUNT(*) FROM confirmations") == ["0"])
        #expect(
            try fixture.laptop.manager.admin(["accounts", "set-local-user", "alice@example.org", "yes"]).status == 0)
        let asked = try fixture.laptop.startLogin(answers: [])
        defer { asked.stop() }
        #expect(try fixture.code(of: asked).count == 6)
    }

    @Test func anApprovalOnTheEnrolledMachineLetsTheUserIn() throws {
        let fixture = try ConfirmationFixture()
        let login = try fixture.laptop.startLogin(answers: [])
        let code = try fixture.code(of: login)
        let approval = try fixture.approve(code: code)
        #expect(approval.status == 0, "\(approval.stderr)")
        #expect(approval.stdout.contains("alice may log in to web1.example.org"), "\(approval.stdout)")
        let result = try fixture.laptop.finish(login)
        #expect(result.code == PAMCode.success, "\(result.output)")
        #expect(result.threadsBefore == result.threadsAfter, "waiting left no thread behind")
        // The QR code in the conversation decodes to the payload the manager made.
        let shown = result.output.components(separatedBy: "[TEXT_INFO] ").last ?? ""
        let qrText = shown.components(separatedBy: "XignIn: approve").first ?? ""
        let decoded = try QRReader.decode(
            bitmap: try QRReader.bitmap(fromTerminalText: qrText), in: fixture.laptop.directory)
        #expect(
            decoded.hasPrefix("HTTP://127.0.0.1:") && decoded.contains("/C#")
                && ConfirmationPayload.confirmationId(in: decoded) != nil, "\(decoded)")
        let rows = qrText.split(separator: "\n", omittingEmptySubsequences: false).count
        #expect(rows + 3 <= 24, "the QR code and its text fit an 80×24 terminal (\(rows) rows)")
    }

    @Test func underSSHDTheTextIsAPromptAndEnterChecksTheDecision() throws {
        let fixture = try ConfirmationFixture()
        // Enter before any approval: the module says so and asks again (here the client then hangs up).
        let early = try fixture.laptop.login(service: "sshd", answers: [""])
        #expect(early.code == PAMCode.conversationError)
        #expect(
            early.output.contains("Press Enter once approved: \n[PROMPT_ECHO_ON] XignIn: not approved yet"),
            "\(early.output)")
        // Approved, then Enter: in.
        let login = try fixture.laptop.startLogin(service: "sshd", answers: ["", ""])
        #expect(try fixture.approve(code: try fixture.code(of: login)).status == 0)
        // One Enter, or two when the first came before the approval.
        let result = try fixture.laptop.finish(login, unusedAnswersAllowed: true)
        #expect(result.code == PAMCode.success, "\(result.output)")
        #expect(result.conversation.hasPrefix("[PROMPT_ECHO_ON] "), "under sshd the text is a prompt")
    }

    @Test func aDenialEndsTheLoginAndCoolsTheAccountDown() throws {
        let fixture = try ConfirmationFixture()
        let login = try fixture.laptop.startLogin(answers: [])
        _ = try fixture.code(of: login)
        let denial = try ChildProcess(
            try Products.path("xign-setup"),
            ["approve", "--state-dir", fixture.laptop.state, "--user", "alice", "--deny", "--wait"],
            in: fixture.laptop.directory
        ).wait()
        #expect(denial.status == 0, "\(denial.stderr)")
        let result = try fixture.laptop.finish(login)
        #expect(result.code == PAMCode.authError)
        #expect(
            result.conversation.hasSuffix("[ERROR_MSG] XignIn: the login was denied on your device."),
            "\(result.conversation)")
        let again = try fixture.laptop.login(answers: [])
        #expect(again.code == PAMCode.authError)
        #expect(again.conversation.contains("was denied a moment ago"), "\(again.conversation)")
    }

    @Test func aWrongCodeIsRefusedAndTheRightOneStillWorks() throws {
        let fixture = try ConfirmationFixture()
        let login = try fixture.laptop.startLogin(answers: [])
        let code = try fixture.code(of: login)
        let wrongCode = code == "000000" ? "111111" : "000000"
        let wrong = try fixture.approve(code: wrongCode)
        #expect(wrong.status == 1)
        #expect(wrong.stderr.contains("not the code the server shows; 2 attempt(s) left"), "\(wrong.stderr)")
        #expect(try fixture.approve(code: code).status == 0)
        #expect(try fixture.laptop.finish(login).code == PAMCode.success)
    }

    /// Three wrong codes end the login, and the server says so: nobody denied it.
    @Test func threeWrongCodesEndTheLoginWithTheirOwnWords() throws {
        let fixture = try ConfirmationFixture()
        let login = try fixture.laptop.startLogin(answers: [])
        let code = try fixture.code(of: login)
        let wrongCode = code == "000000" ? "111111" : "000000"
        for _ in 0..<3 { #expect(try fixture.approve(code: wrongCode).status == 1) }
        let result = try fixture.laptop.finish(login)
        #expect(result.code == PAMCode.authError)
        #expect(
            result.conversation.hasSuffix(
                "[ERROR_MSG] XignIn: the login was refused: the code was typed wrong too often on the approving device. Log in again."
            ),
            "\(result.conversation)")
        #expect(!result.conversation.contains("denied"))
    }

    @Test func aWrongPINCountsTowardTheLockoutAndApprovesNothing() throws {
        let fixture = try ConfirmationFixture()
        let login = try fixture.laptop.startLogin(answers: [])
        let code = try fixture.code(of: login)
        let wrong = try fixture.approve(code: code, pin: "13570")
        #expect(wrong.status == 2, "\(wrong.stderr)")
        #expect(try fixture.laptop.activation("alice@example.org")["failedAttempts"] as? Int == 1)
        kill(login.pid, SIGTERM)
        _ = try? login.wait(timeout: 10)
    }

    @Test func anUnapprovedLoginExpiresWithOneClearLine() throws {
        let fixture = try ConfirmationFixture(
            managerConfig: ManagerProcess.testConfig + "\n[confirmation]\nlifetime = 5s\n")
        let started = Date()
        let result = try fixture.laptop.login(answers: [])
        #expect(result.code == PAMCode.authError)
        #expect(
            result.conversation.hasSuffix("[ERROR_MSG] XignIn: the approval did not arrive in time; log in again."),
            "\(result.conversation)")
        #expect(Date().timeIntervalSince(started) < 15)
    }

    @Test func unknownLoginNamesAndAStoppedManagerEndTheWayTheArgumentsSay() throws {
        let fixture = try ConfirmationFixture()
        #expect(try fixture.laptop.login("bob", answers: []).code == PAMCode.userUnknown)
        try fixture.service("login", arguments: "mode=confirm ignore_unknown_user", then: "auth required pam_permit.so")
        #expect(
            try fixture.laptop.login("bob", answers: []).code == PAMCode.success,
            "ignored: the rest of the stack decides")
        fixture.laptop.manager.stop()
        try fixture.service("login", arguments: "mode=confirm timeout=2")
        #expect(try fixture.laptop.login(answers: []).code == PAMCode.authInfoUnavailable)
    }

    /// Anyone who reaches the server can start logins as alice (over SSH, say). Their pending requests count against their own address: the
    /// newest displaces their oldest, alice's login from elsewhere is confirmed, and her denial of theirs cools
    /// down their address, not her.
    @Test func aStrangersPendingLoginsNeitherBlockNorFreezeTheUsersOwn() throws {
        let fixture = try ConfirmationFixture()
        let (stranger, alice) = (["rhost=203.0.113.9"], ["rhost=198.51.100.7"])
        func login(from items: [String]) throws -> ChildProcess {
            try fixture.laptop.startLogin(answers: [], items: items)
        }
        func confirmationId(of login: ChildProcess) throws -> String {
            _ = try fixture.code(of: login)
            let text = try String(contentsOfFile: login.stdoutPath, encoding: .utf8)
            guard let range = text.range(of: #"/c#[A-Z2-7]+"#, options: .regularExpression) else {
                throw TestFailure("no link: \(text)")
            }
            return String(text[range].dropFirst(3))
        }
        // One after the other, so the first is the oldest.
        var held: [ChildProcess] = [], heldIds: [String] = []
        for _ in 0..<3 {
            held.append(try login(from: stranger))
            heldIds.append(try confirmationId(of: held.last!))
        }
        // A fourth from the same address displaces the first, which nobody opened.
        let fourth = try login(from: stranger)
        _ = try confirmationId(of: fourth)
        let displaced = try fixture.laptop.finish(held[0], timeout: 20)
        #expect(
            displaced.code == PAMCode.authError && displaced.conversation.contains("log in again"),
            "\(displaced.output)")

        // Alice, from her own address, with the stranger's three still pending: confirmed.
        let own = try login(from: alice)
        let code = try fixture.code(of: own)
        #expect(try fixture.approve(code: code, extra: ["XIGN://C/" + (try confirmationId(of: own))]).status == 0)
        #expect(try fixture.laptop.finish(own).code == PAMCode.success)

        // She denies one of the stranger's: the stranger's address cools down, hers does not.
        let denial = try ChildProcess(
            try Products.path("xign-setup"),
            ["approve", "--state-dir", fixture.laptop.state, "--user", "alice", "--deny", "XIGN://C/" + heldIds[1]],
            in: fixture.laptop.directory
        ).wait()
        #expect(denial.status == 0, "\(denial.stderr)")
        let again = try login(from: alice)
        let ownId = try confirmationId(of: again)
        #expect(try fixture.approve(code: try fixture.code(of: again), extra: ["XIGN://C/" + ownId]).status == 0)
        #expect(try fixture.laptop.finish(again).code == PAMCode.success, "her own next login is confirmed")
        let cooled = try fixture.laptop.finish(try login(from: stranger), timeout: 20)
        #expect(
            cooled.code == PAMCode.authError && cooled.conversation.contains("denied a moment ago"),
            "\(cooled.conversation)")
        for login in held.dropFirst() + [fourth] {
            kill(login.pid, SIGTERM)
            _ = try? login.wait(timeout: 10)
        }
    }

    @Test func anAccountWithHostGroupsLogsInOnlyToHostsThatShareOne() throws {
        let fixture = try ConfirmationFixture()
        let admin = fixture.laptop.manager
        // Host access is explicit: without groups (or --all, which the fixture gave) an account logs in nowhere.
        #expect(
            try admin.admin(["accounts", "set-host-groups", "alice@example.org"]).stdout.contains(
                "may log in to no host"))
        #expect(
            try fixture.laptop.login(answers: []).conversation
                == "[ERROR_MSG] XignIn: your account may not log in to this server.")
        #expect(try admin.admin(["accounts", "set-host-groups", "alice@example.org", "databases"]).status == 0)
        let refused = try fixture.laptop.login(answers: [])
        #expect(refused.code == PAMCode.authError)
        #expect(
            refused.conversation == "[ERROR_MSG] XignIn: your account may not log in to this server.",
            "\(refused.conversation)")
        // The host joined without groups; give it one (a new token for its name, after removing it) and join again.
        #expect(try admin.admin(["hosts", "remove", "web1.example.org"]).status == 0)
        try fixture.laptop.joinAsHost(groups: ["databases", "web"], stateDirectory: fixture.server.file("state"))
        let listed =
            try JSONSerialization.jsonObject(with: Data(try admin.admin(["hosts", "list", "--json"]).stdout.utf8))
            as? [[String: Any]] ?? []
        #expect(listed.first?["groups"] as? [String] == ["databases", "web"])
        let login = try fixture.laptop.startLogin(answers: [])
        #expect(try fixture.approve(code: try fixture.code(of: login)).status == 0)
        #expect(try fixture.laptop.finish(login).code == PAMCode.success)
        #expect(
            try admin.admin(["accounts", "set-host-groups", "alice@example.org", "Bad Group"]).stderr.contains(
                "is not a group name"))
    }

    @Test func anEnrolmentWithATPMKeyApprovesToo() throws {
        let fixture = try ConfirmationFixture(tpm: try SoftwareTPM())
        let login = try fixture.laptop.startLogin(answers: [])
        let approval = try fixture.approve(code: try fixture.code(of: login))
        #expect(approval.status == 0, "\(approval.stderr)")
        #expect(try fixture.laptop.finish(login).code == PAMCode.success)
    }

    @Test func modeAutoConfirmsOnAHostAndUsesTheKeyWhereTheUserIsEnrolled() throws {
        let fixture = try ConfirmationFixture(moduleArguments: "mode=auto timeout=30")
        // The server holds no enrolment of alice's: a confirmation.
        let login = try fixture.laptop.startLogin(answers: [])
        #expect(try fixture.approve(code: try fixture.code(of: login)).status == 0)
        #expect(try fixture.laptop.finish(login).code == PAMCode.success)
        // The enrolled machine itself: device key and PIN.
        try fixture.laptop.service("login", arguments: "mode=auto timeout=30")
        let local = try fixture.laptop.login()
        #expect(local.code == PAMCode.success, "\(local.output)")
        #expect(local.conversation == (try PAMFixture.golden("success")))
    }
}
