import Foundation
import Testing
import XignProtocol
import XignTestSupport

/// The console as an administrator uses it: Chromium with its virtual authenticator signs in with passkey and PIN,
/// finds an account and locks it, and the next login of that account through the real pam_xign is refused; unlocked,
/// it logs in again. Every page is photographed at phone and desktop size into .build-screenshots/console, the
/// test's artifacts.
@Suite(.serialized) struct ConsoleTests {
    static let artifacts = PAMFixture.repository + "/.build-screenshots/console"

    /// A browser whose screenshots go to `artifacts/name`, emptied first.
    static func browser(in directory: TemporaryDirectory, _ name: String) -> Browser {
        try? FileManager.default.removeItem(atPath: artifacts + "/" + name)
        return Browser(in: directory, name: name, keptIn: artifacts + "/" + name)
    }

    /// An administrator made at the command line, with a passkey in `browser`; the PIN.
    static func administrator(_ manager: ManagerProcess, _ browser: Browser, _ email: String) throws -> String {
        let added = try manager.admin(["accounts", "add", email])
        let pin = try #require(added.stdout.split(separator: " ").last).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try manager.admin(["accounts", "set-role", email, "admin"]).status == 0)
        let activated = try browser.personalize(try manager.activationAppLink(for: email), pin: pin)
        #expect(activated.error.isEmpty, "\(activated)")
        return pin
    }

    @Test func anAccountLockedInTheConsoleIsRefusedAtItsNextLoginAndLogsInOnceUnlocked() throws {
        let fixture = try PAMFixture(servingBrowsers: true)
        let manager = fixture.manager
        let browser = Self.browser(in: fixture.directory, "lock")
        let pin = try Self.administrator(manager, browser, "root@example.org")
        // Control: alice logs in on this machine.
        #expect(try fixture.login("alice").code == PAMCode.success)

        let signedIn = try browser.consoleSignIn(manager.browserURL + "/console", pin: pin)
        #expect(signedIn.error.isEmpty && signedIn["url"].hasSuffix("/console/accounts"), "\(signedIn)")
        let accounts = manager.browserURL + "/console/accounts"
        let locked = try browser.consoleAct("lock", on: "alice@example.org", at: accounts)
        let pressedAt = locked.fields["pressedAt"] as? Int ?? 0
        let answeredAt = locked.fields["answeredAt"] as? Int ?? 0
        #expect(locked.status.hasPrefix("Locked alice@example.org"), "\(locked)")
        #expect(locked["state"].hasPrefix("locked by console root@example.org"), "\(locked)")

        let started = Date()
        let refused = try fixture.login("alice", answers: [])
        let refusedAt = Int(Date().timeIntervalSince1970 * 1000)
        #expect(refused.code == PAMCode.authError, "\(refused.output)")
        #expect(refused.conversation.contains("an administrator locked your account"), "\(refused.conversation)")
        #expect(try fixture.failedAttempts("alice@example.org") == 0, "a locked account's login checks no PIN")
        print(
            "console lock: the manager answered the click in \(answeredAt - pressedAt) ms (page included); the first login after it was refused \(refusedAt - pressedAt) ms after the click (that login took \(Int(Date().timeIntervalSince(started) * 1000)) ms)"
        )

        let unlocked = try browser.consoleAct("unlock", on: "alice@example.org", at: accounts)
        #expect(unlocked.status.hasPrefix("Unlocked alice@example.org"), "\(unlocked)")
        #expect(try fixture.login("alice").code == PAMCode.success)
        let audit = try manager.query(
            "SELECT event || ' ' || email || ' ' || actor FROM audit_events WHERE actor LIKE 'console %' ORDER BY at")
        #expect(
            audit == [
                "accountLocked alice@example.org console root@example.org",
                "unlock alice@example.org console root@example.org",
            ], "\(audit)")
    }

    /// The hosts page's form sets a host group's sudo policy, and its "none" takes the line away; the manager's table
    /// (what the directory carries to hosts) holds what the page said.
    @Test func aSudoPolicySetOnTheHostsPageIsTheManagers() throws {
        let manager = try ManagerProcess.servingBrowsers()
        let directory = TemporaryDirectory()
        let browser = Self.browser(in: directory, "sudo-policy")
        let pin = try Self.administrator(manager, browser, "root@example.org")
        #expect(try browser.consoleSignIn(manager.browserURL + "/console", pin: pin).error.isEmpty)
        let hosts = manager.browserURL + "/console/hosts"
        let policies = { try manager.query("SELECT group_name, service, policy FROM host_group_sudo_policies") }

        let set = try browser.consoleForm(
            "setSudoPolicy", ["sudoHostGroup": "web", "sudoService": "sudo", "sudoPolicy": "session"], at: hosts)
        #expect(set.status.hasPrefix("sudo on the hosts of web: session."), "\(set)")
        #expect(try policies() == ["web|sudo|session"])
        // A name that is no host group is refused with what to type; nothing is written.
        let bad = try browser.consoleForm(
            "setSudoPolicy", ["sudoHostGroup": "web servers", "sudoPolicy": "fresh"], at: hosts)
        #expect(bad.error.contains("is not a host group name"), "\(bad)")
        #expect(try policies() == ["web|sudo|session"])
        let removed = try browser.consoleForm(
            "setSudoPolicy", ["sudoHostGroup": "web", "sudoService": "sudo", "sudoPolicy": ""], at: hosts)
        #expect(removed.status.hasPrefix("web says nothing about sudo now."), "\(removed)")
        #expect(try policies().isEmpty)
    }

    @Test func everyPageAtPhoneAndDesktopSizeShowsHostileTextAsText() throws {
        let manager = try ManagerProcess.servingBrowsers()
        let directory = TemporaryDirectory()
        let browser = Self.browser(in: directory, "pages")
        let pin = try Self.administrator(manager, browser, "root@example.org")
        #expect(try manager.admin(["accounts", "add", "eve@example.org", "--login-name", "eve"]).status == 0)
        // What the manager's own checks keep out, as if an older version or a restored backup had stored it.
        _ = try manager.query(
            "UPDATE activations SET alias = '<script>window.__xss=1</script>' || char(0) || char(8238) || 'gpj.exe' WHERE account_id = (SELECT id FROM accounts WHERE email = 'eve@example.org')"
        )
        let eve = try #require(try manager.query("SELECT id FROM accounts WHERE email = 'eve@example.org'").first)
        #expect(try browser.consoleSignIn(manager.browserURL + "/console", pin: pin).error.isEmpty)
        let paths = [
            "/console/accounts", "/console/accounts/\(eve)", "/console/audit", "/console/audit?kind=accountCreated",
            "/console/hosts", "/console/health", "/console/waiting",
        ]
        let shown = try browser.consolePages(paths, at: manager.browserURL)
        let pages = browser.records(shown, "pages")
        #expect(pages.count == paths.count * 2)
        for page in pages {
            let place = "\(page["path"] ?? "") at \(page["size"] ?? "")"
            #expect((page["error"] as? String ?? "x").isEmpty, "\(place): \(page)")
            #expect(page["overflow"] as? Bool == false, "\(place) scrolls sideways")
            #expect(page["scripts"] as? Int == 0, "\(place) has a script in its content")
        }
        let detail = try #require(pages.first { $0["path"] as? String == "/console/accounts/\(eve)" })
        #expect((detail["text"] as? String ?? "").contains("<script>window.__xss=1</script>\u{FFFD}\u{FFFD}gpj.exe"))

        // Without a session: the sign-in page, and every other page says how to sign in (403).
        let stranger = Self.browser(in: directory, "stranger")
        let outside = browser.records(
            try stranger.consolePages(["/console", "/console/accounts"], at: manager.browserURL), "pages")
        #expect(outside.map { $0["h1"] as? String } == ["Sign in", "Sign in", "Not signed in", "Not signed in"])
    }
}
