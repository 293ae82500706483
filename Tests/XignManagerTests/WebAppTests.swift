import Foundation
import Testing
import XignCrypto
import XignProtocol
import XignTestSupport

/// The manager's web app in Debian's Chromium at phone size, with Chrome's virtual authenticator as the phone's passkeys:
/// the activation link from the outbox, a login request approved or refused, and the pages' headers.
@Suite(.serialized) struct WebAppTests {
    static func link(_ api: API, confirmation id: String) -> String { "\(api.manager.browserURL)/c#\(id)" }

    /// The activation link of the mail in the outbox, at the manager's public URL.
    static func activate(_ api: API, _ browser: Browser, _ email: String, pin: String = "24680") throws -> Browser.Page {
        _ = try api.register(email, pin: pin)
        return try browser.personalize(try api.manager.activationAppLink(for: email), pin: pin)
    }

    @Test func aPhoneActivatesFromTheMailAndApprovesALogin() throws {
        let api = API(manager: try ManagerProcess.servingBrowsers())
        let browser = Browser(in: api.manager.directory)
        let activated = try Self.activate(api, browser, "alice@example.org")
        #expect(activated.error.isEmpty, "\(activated)")
        #expect(activated["account"] == "alice@example.org (Activation 1)" && activated["outcome"].hasPrefix("A new activation"), "\(activated)")
        #expect(activated["done-text"].hasPrefix("alice@example.org (Activation 1)"), "\(activated)")
        let device = try api.manager.query("SELECT key_kind, name FROM devices")
        #expect(device.count == 1 && device[0].hasPrefix("passkey|Passkey in a browser on "), "\(device)")

        try api.manager.giveLogin("alice@example.org", "alice")
        let host = try JoinedHost(api)
        let started = try host.start("alice").signedPayload(key: try api.managerKey, type: SignedAnswerType.confirmationStart)
        let id = try #require(started["confirmationId"] as? String), code = try #require(started["code"] as? String)
        #expect(started["appLink"] as? String == Self.link(api, confirmation: id), "the host shows the link this page answers")
        let page = try browser.approve(Self.link(api, confirmation: id), code: code, pin: "24680")
        #expect(page.error.isEmpty && page.status == "Approved. The login to web1 goes on.", "\(page)")
        #expect(page["host"] == "web1" && page["service"] == "sshd" && page["login"] == "alice" && page["remote"] == "192.0.2.7, ssh", "\(page)")
        let waited = try api.post(
            APIPath.confirmationWait, ConfirmationWaitRequest(confirmationId: id, waitToken: started["waitToken"] as? String ?? "", waitMilliseconds: 0)
        ).signedPayload(key: try api.managerKey, type: SignedAnswerType.confirmationResult)
        #expect(waited["state"] as? String == "approved")
        #expect(activated.screenshots.count == 3 && page.screenshots.count == 2)
    }
}
