import Foundation
import Testing
import XignTestSupport

/// GNOME 51's own greeter and lock screen, as a contract (a model of their side; the real ones run in the VM of
/// `make desktop-test-next`): the libpam harness plays GDM's session worker, with GDM_SUPPORTED_PAM_EXTENSIONS in its
/// environment and each binary prompt read as GDM reads a CustomJSON message, and answers as gnome-shell 51 does
/// (`authServicesSSSDSwitchable.js`): the chosen mechanism's Ok, or a reset (its back button, its timeout). The module
/// reads no environment: the extension's number (here 1, the second of the list) is its argument `gdm_json=`.
struct GNOMEGreeterTests {
    static let extensions =
        "gdm=org.gnome.DisplayManager.UserVerifier.ChoiceList org.gnome.DisplayManager.UserVerifier.CustomJSON"
    static let json = "gdm_json=1"
    static let service = "gdm-switchable-auth"
    /// GDM's worker names the virtual terminal of the greeter's seat.
    static let atTheMachine = "tty=/dev/tty1"

    static func pin(_ pin: String) -> String { #"{"authSelection":{"status":"Ok","pin":{"password":"\#(pin)"}}}"# }
    static let done = #"{"authSelection":{"status":"Ok","eidp":{}}}"#

    /// The JSON messages of a conversation, decoded.
    static func requests(_ login: PAMFixture.Login) -> [[String: Any]] {
        login.conversation.split(separator: "\n").compactMap { line -> [String: Any]? in
            guard line.hasPrefix("[JSON auth-mechanisms 1] ") else { return nil }
            let json = line.dropFirst("[JSON auth-mechanisms 1] ".count)
            let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
            return (object?["authSelection"] as? [String: Any])?["mechanisms"] as? [String: Any]
        }
    }

    @Test func theGreeterAsksForThePINAsItsOwnPasswordEntry() throws {
        let fixture = try PAMFixture()
        try fixture.service(Self.service, arguments: Self.json)
        let login = try fixture.login(
            service: Self.service, answers: [Self.pin("24680")], items: [Self.atTheMachine, Self.extensions])
        #expect(login.code == PAMCode.success, "\(login.output)")
        #expect(login.conversation.hasPrefix("[JSON auth-mechanisms 1] "), "JSON comes first: \(login.conversation)")
        let pin = try #require(Self.requests(login).first?["pin"] as? [String: Any], "\(login.conversation)")
        #expect(pin["role"] as? String == "password" && (pin["prompt"] as? String ?? "").contains("PIN"), "\(pin)")
        #expect(try fixture.completedLogins("alice") == 1)

        // Controls: without the argument, and under gdm-password with it (GDM 43 to 49, where the same common-auth
        // line runs), the same PIN goes through a plain prompt.
        for (service, arguments) in [(Self.service, ""), ("gdm-password", Self.json)] {
            try fixture.service(service, arguments: arguments)
            let plain = try fixture.login(
                service: service, answers: ["24680"], items: [Self.atTheMachine, Self.extensions])
            #expect(plain.code == PAMCode.success, "\(service): \(plain.output)")
            #expect(plain.conversation.hasPrefix("[PROMPT_ECHO_OFF] "), "\(service): \(plain.conversation)")
            #expect(!plain.conversation.contains("[JSON"), "\(service): \(plain.conversation)")
        }
    }

    /// A wrong PIN is said and the entry comes back in the same conversation: a refusal would hand the greeter to the
    /// next module, whose plain prompt it no longer shows, and it would wait until the person went back. While the
    /// manager's lock after it lasts (a second here), the greeter asks the person to try again, and a PIN typed after
    /// it logs in.
    @Test func aWrongPINIsSaidAndTheEntryComesBack() throws {
        let fixture = try PAMFixture(managerConfig: ManagerFiles.testConfig(firstLock: "100ms"))
        try fixture.service(Self.service, arguments: Self.json)
        let login = try fixture.login(
            service: Self.service,
            answers: [Self.pin("13570")] + Array(repeating: "after=1 " + Self.pin("24680"), count: 5),
            items: [Self.atTheMachine, Self.extensions], unusedAnswersAllowed: true)
        #expect(login.code == PAMCode.success, "\(login.output)")
        #expect(Self.requests(login).count >= 2, "\(login.conversation)")
        #expect(login.conversation.contains("[ERROR_MSG] Wrong PIN."), "\(login.conversation)")
        #expect(!login.conversation.contains("[PROMPT"), "no plain prompt once JSON was sent: \(login.conversation)")
        #expect(try fixture.failedAttempts("alice@example.org") == 0, "the right PIN cleared the count")
        #expect(try fixture.completedLogins("alice") == 1)
    }

    /// The greeter resets (its back button, or its timeout): the conversation fails and the login ends.
    @Test func aGreeterThatResetsEndsTheLogin() throws {
        let fixture = try PAMFixture()
        try fixture.service(Self.service, arguments: Self.json)
        let login = try fixture.login(
            service: Self.service, answers: ["CANCEL"], items: [Self.atTheMachine, Self.extensions])
        #expect(login.code == PAMCode.conversationError, "\(login.output)")
        #expect(try fixture.failedAttempts("alice@example.org") == 0, "no PIN was checked")
    }

    /// A number that names another of GDM's extensions is refused by the greeter's side (GDM would read the message as
    /// that extension's), so the login ends there and no PIN is checked.
    @Test func aNumberThatIsNotCustomJSONsEndsTheLogin() throws {
        let fixture = try PAMFixture()
        try fixture.service(Self.service, arguments: "gdm_json=0")
        let login = try fixture.login(
            service: Self.service, answers: [Self.pin("24680")], items: [Self.atTheMachine, Self.extensions],
            unusedAnswersAllowed: true)
        #expect(login.code == PAMCode.conversationError, "\(login.output)")
        #expect(login.conversation.hasPrefix("[BINARY_PROMPT] not GDM's CustomJSON"), "\(login.conversation)")
        #expect(try fixture.completedLogins("alice") == 0)
    }

    /// Where the person holds no key: the greeter draws the approval link as a QR code with the code. Done before the
    /// approval is answered "not yet" with the same approval shown again, and Done after it logs the person in.
    @Test func aPersonWithoutAKeyHereApprovesFromTheGreetersOwnQRCode() throws {
        let fixture = try ConfirmationFixture()
        try fixture.service(Self.service, arguments: "mode=confirm timeout=30 \(Self.json)")
        let login = try fixture.laptop.startLogin(
            service: Self.service, answers: Array(repeating: Self.done, count: 40),
            items: [Self.atTheMachine, Self.extensions])
        let code = try Self.shownCode(of: login)
        #expect(try waitUntil(seconds: 20) { login.printed.contains("[ERROR_MSG] XignIn: not approved yet") })
        #expect(try fixture.approve(code: code).status == 0)
        let result = try fixture.laptop.finish(login, unusedAnswersAllowed: true)
        #expect(result.code == PAMCode.success, "\(result.output)")
        let requests = Self.requests(result).compactMap { $0["eidp"] as? [String: Any] }
        #expect(requests.count >= 2 && requests.count == Self.requests(result).count, "\(result.conversation)")
        let approval = try #require(requests.first)
        #expect(
            requests.allSatisfy { $0["code"] as? String == code && $0["uri"] as? String == approval["uri"] as? String })
        #expect(approval["role"] as? String == "eidp", "\(approval)")
        let uri = approval["uri"] as? String ?? ""
        #expect(uri.hasPrefix("http://127.0.0.1:") && uri.contains("/c#"), "\(uri)")
        #expect((1...300).contains(approval["timeout"] as? Int ?? 0), "the approval's time left: \(approval)")
        #expect(!result.conversation.contains("[PROMPT") && !result.conversation.contains("[TEXT_INFO]"))
    }

    /// The greeter's timeout or back button while the approval waits: nothing is left for the phone to approve.
    @Test func aResetWithdrawsTheApproval() throws {
        let fixture = try ConfirmationFixture()
        try fixture.service(Self.service, arguments: "mode=confirm timeout=30 \(Self.json)")
        let login = try fixture.laptop.login(
            service: Self.service, answers: ["CANCEL"], items: [Self.atTheMachine, Self.extensions])
        #expect(login.code == PAMCode.conversationError, "\(login.output)")
        #expect(Self.requests(login).count == 1, "\(login.conversation)")
        #expect(
            try fixture.laptop.manager.query("SELECT state FROM confirmations") == ["withdrawn"],
            "the reset withdrew the confirmation")
    }

    /// The code the greeter was sent, once it was.
    static func shownCode(of login: ChildProcess, timeout: Double = 20) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let text = login.printed
            if let range = text.range(of: #""code":"\d{6}""#, options: .regularExpression) {
                return String(text[range].dropLast().suffix(6))
            }
            if login.poll() != nil { throw TestFailure("the login ended before the greeter got a code: \(text)") }
            usleep(20_000)
        }
        throw TestFailure("no code sent within \(timeout) s")
    }
}

extension ChildProcess {
    /// What the process printed so far.
    var printed: String { (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "" }
}
