import Foundation
import Testing
import XignCore
import XignCrypto
import XignProtocol
import XignTestSupport

/// The manager's web app in Debian's Chromium at phone size, with Chrome's virtual authenticator as the phone's passkeys:
/// the activation link from the outbox, a login request approved or refused, and the pages' headers.
@Suite(.serialized, .machineShare) struct WebAppTests {
    static func link(_ api: API<ManagerProcess>, confirmation id: String) -> String {
        "\(api.manager.browserURL)/c#\(id)"
    }

    /// The activation link of the mail in the outbox, at the manager's public URL.
    static func activate(
        _ api: API<ManagerProcess>, _ browser: Browser, _ email: String, pin: String = "24680"
    ) async throws -> Browser.Page {
        _ = try await api.register(email, pin: pin)
        return try browser.personalize(try api.manager.activationAppLink(for: email), pin: pin)
    }

    @Test func aPhoneActivatesFromTheMailAndApprovesALogin() async throws {
        let api = API(manager: try ManagerProcess.servingBrowsers())
        let browser = Browser(in: api.manager.directory)
        let activated = try await Self.activate(api, browser, "alice@example.org")
        #expect(activated.error.isEmpty, "\(activated)")
        #expect(
            activated["account"] == "alice@example.org (Activation 1)"
                && activated["outcome"].hasPrefix("A new activation"), "\(activated)")
        #expect(activated["done-text"].hasPrefix("alice@example.org (Activation 1)"), "\(activated)")
        let device = try api.manager.query("SELECT key_kind, name FROM devices")
        #expect(device == ["passkey|Passkey in a browser"], "\(device)")
        let listed = try api.manager.admin(["activations"]).stdout
        #expect(
            listed.contains("Passkey in a browser (Linux") && listed.contains("device-bound passkey"),
            "the administrator's list: \(listed)")

        try api.manager.giveLogin("alice@example.org", "alice")
        let host = try await JoinedHost(api)
        let started = try await host.start("alice").signedPayload(
            key: try api.managerKey, type: SignedAnswerType.confirmationStart)
        let id = try #require(started["confirmationId"] as? String), code = try #require(started["code"] as? String)
        #expect(
            started["appLink"] as? String == Self.link(api, confirmation: id),
            "the host shows the link this page answers")
        let page = try browser.approve(Self.link(api, confirmation: id), code: code, pin: "24680")
        #expect(page.error.isEmpty && page.status == "Approved. The login to web1 goes on.", "\(page)")
        #expect(
            page["host"] == "web1" && page["service"] == "sshd" && page["login"] == "alice"
                && page["remote"] == "192.0.2.7, ssh", "\(page)")
        let waited = try await api.post(
            APIPath.confirmationWait,
            ConfirmationWaitRequest(
                confirmationId: id, waitToken: started["waitToken"] as? String ?? "", waitMilliseconds: 0)
        ).signedPayload(key: try api.managerKey, type: SignedAnswerType.confirmationResult)
        #expect(waited["state"] as? String == "approved")
        #expect(activated.screenshots.count == 3 && page.screenshots.count == 2)
    }

    /// A login request started for `loginName` by a joined host: its id, code and wait token.
    static func request(
        _ api: API<ManagerProcess>, _ host: JoinedHost<ManagerProcess>, _ loginName: String = "alice",
        remote: String = "192.0.2.7"
    ) async throws -> (
        id: String, code: String, state: () async throws -> String
    ) {
        let started = try await host.start(loginName, remoteHost: remote).signedPayload(
            key: try api.managerKey, type: SignedAnswerType.confirmationStart)
        let id = try #require(started["confirmationId"] as? String), token = started["waitToken"] as? String ?? ""
        let state = {
            try await api.post(
                APIPath.confirmationWait,
                ConfirmationWaitRequest(confirmationId: id, waitToken: token, waitMilliseconds: 0)
            )
            .signedPayload(key: try api.managerKey, type: SignedAnswerType.confirmationResult)["state"] as? String ?? ""
        }
        return (id, try #require(started["code"] as? String), state)
    }

    /// Each refusal the page shows, beside the control that passes: a wrong PIN (counted by the lockout), three wrong
    /// codes (deny), the deny button, and a passkey of another account.
    @Test func wrongPINsWrongCodesDenialAndAnotherAccountsPasskeyAreRefused() async throws {
        let api = API(manager: try ManagerProcess.servingBrowsers())
        let phone = Browser(in: api.manager.directory)
        await #expect(try Self.activate(api, phone, "alice@example.org").error.isEmpty)
        try api.manager.giveLogin("alice@example.org", "alice")
        let host = try await JoinedHost(api)
        func failedAttempts() throws -> [String] { try api.manager.query("SELECT failed_attempts FROM activations") }

        var request = try await Self.request(api, host)
        let wrongPIN = try phone.approve(Self.link(api, confirmation: request.id), code: request.code, pin: "13579")
        #expect(wrongPIN.error.hasPrefix("Wrong PIN. XignIn is locked until"), "\(wrongPIN)")
        #expect(try failedAttempts() == ["1"])
        #expect(try await request.state() == "pending")
        try await Task.sleep(for: .seconds(0.4))  // the test config's first lock
        let approved = try phone.approve(Self.link(api, confirmation: request.id), code: request.code, pin: "24680")
        #expect(approved.status.hasPrefix("Approved"), "\(approved)")
        #expect(try failedAttempts() == ["0"])
        #expect(try await request.state() == "approved")

        request = try await Self.request(api, host, remote: "192.0.2.8")
        let next = String((Int(request.code)! + 1) % 1_000_000)
        let wrong = String(repeating: "0", count: 6 - next.count) + next
        let first = try phone.approve(Self.link(api, confirmation: request.id), code: wrong, pin: "24680")
        #expect(first.error == "That is not the code the server shows; 2 attempt(s) left", "\(first)")
        _ = try phone.approve(Self.link(api, confirmation: request.id), code: wrong, pin: "24680")
        let third = try phone.approve(Self.link(api, confirmation: request.id), code: wrong, pin: "24680")
        #expect(third.error.hasSuffix("the login was refused. Start it again on the server"), "\(third)")
        #expect(try await request.state() == "denied")
        #expect(try failedAttempts() == ["0"], "a wrong code tests no PIN")
        #expect(
            try phone.view(Self.link(api, confirmation: request.id)).error
                == "This login was refused: a wrong code was typed too often. Start the login on the server again.",
            "not 'denied'")

        request = try await Self.request(api, host, remote: "192.0.2.9")
        let denied = try phone.deny(Self.link(api, confirmation: request.id))
        #expect(denied.status == "Denied. The server refuses this login.", "\(denied)")
        #expect(try await request.state() == "denied")
        #expect(
            try phone.view(Self.link(api, confirmation: request.id)).error
                == "This login was denied on an enrolled device.")

        // Bob's phone holds a passkey of this manager, but the request is Alice's.
        let other = Browser(in: api.manager.directory, name: "bob")
        await #expect(try Self.activate(api, other, "bob@example.org").error.isEmpty)
        request = try await Self.request(api, host, remote: "192.0.2.10")
        let strangers = try other.approve(Self.link(api, confirmation: request.id), code: request.code, pin: "24680")
        #expect(
            strangers.error.contains("not for your account"),
            "\(strangers)")
        #expect(try await request.state() == "pending")
        #expect(
            try phone.approve(Self.link(api, confirmation: request.id), code: request.code, pin: "24680").status
                .hasPrefix("Approved"))

        // Every refused attempt is in the audit, with the device, the reason and the host's own service.
        let audit = try api.manager.admin(["audit"]).stdout
        let lines = audit.split(separator: "\n")
        #expect(
            lines.contains { $0.contains("loginFailure") && $0.contains("sshd") && $0.contains("wrong PIN") },
            "\(audit)")
        #expect(lines.filter { $0.contains("approvalRefused") && $0.contains("wrong code") }.count == 3, "\(audit)")
        #expect(
            lines.contains { $0.contains("approvalRefused") && $0.contains("another account") && $0.contains("sshd") },
            "\(audit)")
        #expect(
            lines.contains { $0.contains("login") && $0.contains("approved on a device") && $0.contains("sshd") },
            "\(audit)")
        #expect(!audit.contains(" confirm "), "the manager's built-in service is not the host's: \(audit)")
    }

    /// The next login's link opened in the tab of the last one (only the part after "#" differs) shows the next login
    /// with its form, never the last one's state.
    @Test func aSecondLoginsLinkInTheSameTabShowsTheSecondLogin() async throws {
        let api = API(manager: try ManagerProcess.servingBrowsers())
        let phone = Browser(in: api.manager.directory)
        await #expect(try Self.activate(api, phone, "alice@example.org").error.isEmpty)
        try api.manager.giveLogin("alice@example.org", "alice")
        let host = try await JoinedHost(api)
        let first = try await Self.request(api, host, remote: "192.0.2.21"),
            second = try await Self.request(api, host, remote: "192.0.2.22")
        let page = try phone.approveThenOpen(
            Self.link(api, confirmation: first.id), code: first.code, pin: "24680",
            next: Self.link(api, confirmation: second.id))
        #expect(page["remote"].hasPrefix("192.0.2.22"), "\(page)")
        #expect(
            page.status.isEmpty && page.error.isEmpty, "the second login's form, not the first's 'Approved': \(page)")
        #expect(try await first.state() == "approved")
        #expect(try await second.state() == "pending")
    }

    @Test func aRequestThatRanOutSaysSo() async throws {
        let api = API(
            manager: try ManagerProcess.servingBrowsers(
                config: ManagerProcess.testConfig + "\n[confirmation]\nlifetime = 12s\n"))
        let phone = Browser(in: api.manager.directory)
        await #expect(try Self.activate(api, phone, "alice@example.org").error.isEmpty)
        try api.manager.giveLogin("alice@example.org", "alice")
        let request = try await Self.request(api, try JoinedHost(api))
        // Taken once the request is made, so its 12 s are surely over 12.2 s from here. A clock taken before it left
        // the request only 0.2 s to be made; under ThreadSanitizer the page then once still offered to decide.
        let requested = Date()
        // 12 s, so that a browser slow to start on a loaded machine still finds the request waiting.
        #expect(
            try phone.view(Self.link(api, confirmation: request.id)).error.isEmpty,
            "the control: while it waits, the page offers to decide")
        try await Task.sleep(for: .seconds(max(0, 12.2 - Date().timeIntervalSince(requested))))
        #expect(
            try phone.view(Self.link(api, confirmation: request.id)).error
                == "This login request ran out. Start the login on the server again.")
        #expect(
            try phone.approve(Self.link(api, confirmation: request.id), code: request.code, pin: "24680").status.isEmpty
        )
        #expect(try await request.state() == "expired")
    }

    /// A page of another site may ask the phone's real passkey for an assertion: on the same host name (another port)
    /// the browser gives one, and the manager refuses its origin; on another host name the browser refuses the RP id.
    /// The control: the same request asked for at the manager's own origin is accepted.
    @Test func anAssertionAPageOfAnotherOriginObtainedIsRefused() async throws {
        let api = API(manager: try ManagerProcess.servingBrowsers())
        let phone = Browser(in: api.manager.directory)
        await #expect(try Self.activate(api, phone, "alice@example.org").error.isEmpty)
        let credential = try #require(try api.manager.query("SELECT credential_id FROM devices").first)
        let deviceId = try #require(try api.manager.query("SELECT id FROM devices").first)
        let otherPort = try ManagerProcess.freePort()
        let site = try ChildProcess(
            "/usr/bin/python3",
            [
                "-m", "http.server", String(otherPort), "--bind", "127.0.0.1", "--directory",
                api.manager.directory.file("browser-phone"),
            ],
            in: api.manager.directory)
        defer { site.stop() }
        #expect(
            waitUntil {
                (try? HTTPClient().send("GET", to: try ManagerURL("http://127.0.0.1:\(otherPort)"), path: "/"))?.status
                    == 200
            })

        func listDevices(assertedAt url: String) async throws -> (Browser.Page, APIAnswer?) {
            let challenge = try #require(
                try await api.post(APIPath.challenges, ChallengeRequest(deviceId: deviceId)).json["challenge"]
                    as? String)
            let body = try JSONEncoder.canonical.encode(
                AccountDevicesRequest(deviceId: deviceId, challenge: challenge, nonce: "l"))
            let message = SignedRequest.canonicalMessage(
                method: "POST", path: APIPath.accountDevices, body: body, challenge: challenge)
            let page = try phone.assertion(
                at: url, challenge: Base64URL.encode(SHA256.hash(message)), rpId: "localhost", credentialId: credential)
            guard !page["header"].isEmpty else { return (page, nil) }
            return (
                page,
                try await api.call(
                    "POST", APIPath.accountDevices, body: body,
                    headers: [(SignedRequest.signatureHeader, page["header"])])
            )
        }
        let (relayed, refused) = try await listDevices(assertedAt: "http://localhost:\(otherPort)/")
        #expect(
            relayed["origin"] == "http://localhost:\(otherPort)",
            "the browser gave the other origin an assertion: \(relayed)")
        #expect(
            refused?.status == 401 && (refused?.error["message"] as? String)?.contains("another origin") == true,
            "\(String(describing: refused?.json))")
        let (blocked, _) = try await listDevices(assertedAt: "http://127.0.0.1:\(otherPort)/")
        #expect(
            blocked["error"].hasPrefix("SecurityError"),
            "a page on another host name gets no assertion for this RP id: \(blocked)")
        let (own, accepted) = try await listDevices(assertedAt: "\(api.manager.browserURL)/c")
        #expect(accepted?.status == 200, "the control: \(own) \(String(describing: accepted?.json))")
    }

    @Test func theAccountPageShowsAWaitingLoginByItself() async throws {
        let api = API(manager: try ManagerProcess.servingBrowsers())
        let phone = Browser(in: api.manager.directory)
        await #expect(try Self.activate(api, phone, "alice@example.org").error.isEmpty)
        try api.manager.giveLogin("alice@example.org", "alice")
        let host = try await JoinedHost(api)
        let page = try await phone.waitForLogins(at: "\(api.manager.browserURL)/account") {
            try await Task.sleep(for: .seconds(1))
            _ = try await Self.request(api, host)
        }
        #expect(page.error.isEmpty && page.list("waiting").count == 1, "\(page)")
        #expect(page.list("waiting").first?.hasPrefix("alice on web1 (sshd) from 192.0.2.7") == true, "\(page)")
        // Without the session's cookie the list is refused.
        let refused = try await api.post(APIPath.webPending, WebPendingRequest(waitMilliseconds: 0, seen: []))
        #expect(refused.status == 401 && refused.errorCode == "sessionInvalid")
    }
}
