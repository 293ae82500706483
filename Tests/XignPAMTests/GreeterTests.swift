import Foundation
import Testing
import XignTestSupport

/// LightDM 1.26 with lightdm-gtk-greeter, for real: LightDM runs PAM as root with its `lightdm` service (here from the
/// fixture's directory, through pam_wrapper), so the module logs in as it does for login. The name and PIN are typed
/// into the greeter with xdotool, and each step is photographed.
@Suite(.serialized) struct LightDMTests {
    /// LightDM's services in the fixture's directory: `lightdm` with the module (`arguments`, then `then`), its greeter's own.
    static func services(_ fixture: PAMFixture, arguments: String = "", then: String = "") throws {
        try fixture.service(
            "lightdm", arguments: arguments,
            then: then + "account required pam_permit.so\nsession required pam_permit.so")
        try greeterServices(in: fixture.directory)
    }

    /// The services of LightDM's greeter and autologin, which the module is not in.
    static func greeterServices(in directory: TemporaryDirectory) throws {
        for name in ["lightdm-greeter", "lightdm-autologin"] {
            _ = try directory.write(
                "pam.d/\(name)",
                "auth required pam_permit.so\naccount required pam_permit.so\nsession required pam_permit.so\n",
                mode: 0o644)
        }
    }

    /// The manager's lock after one wrong PIN here: long enough that the greeter's immediate new conversation meets it
    /// on a busy machine too (a CI run met the test config's 300 ms lock already over, 300 ms after the refusal).
    static let lockAfterAWrongPIN: TimeInterval = 3

    @Test func theGreeterAsksForThePINRefusesAWrongOneAndLogsInWithTheRightOne() throws {
        let fixture = try PAMFixture(
            managerConfig: ManagerProcess.testConfig(firstLock: "\(Int(Self.lockAfterAWrongPIN))s"), users: ["nobody"])
        try Self.services(fixture)
        let greeter = try LightDM(pamServiceDirectory: fixture.confdir)
        defer {
            try? greeter.log.write(toFile: try DesktopArtifacts.path("lightdm.log"), atomically: true, encoding: .utf8)
        }
        usleep(1_000_000)  // the greeter draws after it asks
        try greeter.picture(to: try DesktopArtifacts.path("lightdm-greeter.png"))

        try greeter.type("nobody")
        #expect(try waitUntil(seconds: 20) { greeter.conversations(of: "nobody") > 0 && greeter.isAsking })
        usleep(1_000_000)
        try greeter.picture(to: try DesktopArtifacts.path("lightdm-pin-prompt.png"))
        try greeter.type("13570")
        #expect(
            try waitUntil(seconds: 20) { greeter.authentications(of: "nobody", ending: "Authentication failure") == 1 },
            "\(greeter.log.suffix(1500))"
        )
        let refused = Date()
        #expect(try fixture.failedAttempts("nobody@example.org") == 1, "the wrong PIN reached the manager")
        // lightdm-gtk-greeter starts over for the same user at once, while the manager's lock after a wrong PIN still
        // holds: the module says so and ends that conversation (PAM_MAXTRIES) before asking for a PIN.
        #expect(
            try waitUntil(seconds: 20) {
                greeter.authentications(of: "nobody", ending: "Have exhausted maximum number of retries for service")
                    == 1
            },
            "\(greeter.log.suffix(1500))")
        usleep(1_000_000)
        try greeter.picture(to: try DesktopArtifacts.path("lightdm-wrong-pin.png"))

        // The greeter now waits with no conversation behind its password field (nothing typed there reaches PAM): the
        // person starts again from the name, which is still in its field, once the lock (which began before the
        // refusal was seen) is over, and the PIN is asked.
        let lockLeft = Self.lockAfterAWrongPIN - Date().timeIntervalSince(refused)
        if lockLeft > 0 { usleep(UInt32(lockLeft * 1_000_000) + 100_000) }
        #expect(try greeter.startAgain(as: "nobody"), "\(greeter.log.suffix(1500))")
        usleep(500_000)
        try greeter.type("24680")
        #expect(
            try waitUntil(seconds: 20) { greeter.authentications(of: "nobody", ending: "Success") == 1 },
            "\(greeter.log.suffix(1500))")
        #expect(
            try fixture.completedLogins("nobody") == 1, "the manager recorded the login: \(greeter.log.suffix(3000))")
        #expect(try fixture.failedAttempts("nobody@example.org") == 0, "the right PIN cleared the count")
        // Only a picture for people to look at: the session starts and ends at once here (nobody has no desktop), and
        // LightDM may already have taken the greeter's X server down, so a missing picture is no failure.
        try? greeter.picture(to: try DesktopArtifacts.path("lightdm-after-login.png"))
    }

    /// A manager that stalls: the greeter gets its answer within the module's timeout (3 s here) and never hangs.
    /// failmode=secure refuses with the reason said; failmode=safe hands over to the next module (here pam_permit, in
    /// place of the password a real stack asks for).
    @Test(arguments: ["secure", "safe"]) func aStalledManagerNeverHangsTheGreeter(failmode: String) throws {
        let fixture = try PAMFixture(users: ["nobody"])
        let stalled = try FaultyServer.delaying(60, to: fixture.manager.port)
        try fixture.redirectEnrolments(to: stalled.url)
        try Self.services(
            fixture, arguments: "timeout=3 failmode=\(failmode)",
            then: failmode == "safe" ? "auth required pam_permit.so\n" : "")
        let greeter = try LightDM(pamServiceDirectory: fixture.confdir)
        usleep(1_000_000)
        try greeter.type("nobody")
        let typed = Date()
        let expected = failmode == "safe" ? "Success" : "Authentication service cannot retrieve authentication info"
        // The PIN is typed if the module asks for it before it hears from the manager.
        var answered = false
        #expect(
            try waitUntil(seconds: 20) {
                if !answered, greeter.conversations(of: "nobody") > 0, greeter.isAsking {
                    answered = true
                    try greeter.type("24680")
                }
                return greeter.authentications(of: "nobody", ending: expected) == 1
            }, "\(greeter.log.suffix(1500))")
        let waited = Date().timeIntervalSince(typed)
        #expect(waited < 10, "the greeter waited \(waited) s for a 3 s timeout")
        #expect(!stalled.requests.isEmpty, "the module asked the stalled manager")
        usleep(1_000_000)
        try greeter.picture(to: try DesktopArtifacts.path("lightdm-manager-stalled-\(failmode).png"))
    }

    /// A role that asks for a finger (the real fprintd with its virtual reader): after the PIN the greeter shows the
    /// module's cue, read from its picture; another finger is refused, and the enrolled one logs in.
    @Test func aRoleThatAsksForAFingerShowsTheCueAndTakesOnlyTheEnrolledFinger() throws {
        let (fixture, reader) = try PAMFixture.greeterWithFinger()
        try Self.services(fixture)
        let greeter = try LightDM(pamServiceDirectory: fixture.confdir)
        usleep(1_000_000)
        try greeter.type("nobody")
        #expect(try waitUntil(seconds: 20) { greeter.conversations(of: "nobody") > 0 && greeter.isAsking })
        try greeter.type("24680")
        let picture = try DesktopArtifacts.path("lightdm-touch-the-reader.png")
        var shown = ""
        #expect(
            try waitUntil(seconds: 10, every: 300_000) {
                try greeter.picture(to: picture)
                shown = try ScreenText.read(picture, in: fixture.directory)
                return shown.contains("Touch the fingerprint reader")
            }, "\(shown)")
        try reader.scan("mallory")
        #expect(
            try waitUntil(seconds: 20) { greeter.authentications(of: "nobody", ending: "Authentication failure") == 1 },
            "\(greeter.log.suffix(1500))"
        )
        usleep(1_000_000)
        try greeter.picture(to: try DesktopArtifacts.path("lightdm-wrong-finger.png"))

        #expect(try greeter.askAgain(as: "nobody"), "\(greeter.log.suffix(1500))")
        try greeter.type("24680")
        try reader.scan("nobody-right")
        #expect(
            try waitUntil(seconds: 20) { greeter.authentications(of: "nobody", ending: "Success") == 1 },
            "\(greeter.log.suffix(1500))")
    }

    /// A shared machine where the person holds no key: lightdm-gtk-greeter draws PAM's text in a proportional font, so
    /// with `qr=text` the module shows one line, the account page and the code, read here from the greeter's picture
    /// with tesseract. The phone signs in there with its passkey, opens the waiting login, types the code and the PIN,
    /// and LightDM logs the person in.
    @Test func aPhoneApprovesFromTheAccountPageTheGreeterNames() throws {
        let user = try SSHServer.user.get()
        let fixture = try ConfirmationFixture(servingBrowsers: true)
        let manager = fixture.laptop.manager
        try manager.giveLogin("alice@example.org", user)
        let activation = try #require(try manager.query("SELECT id FROM activations").first)
        #expect(try manager.admin(["reissue", activation]).status == 0)
        let phone = Browser(in: fixture.laptop.directory)
        #expect(
            try phone.personalize(try manager.activationAppLink(for: "alice@example.org"), pin: "24680").error.isEmpty)
        try fixture.service(
            "lightdm", arguments: "mode=confirm qr=text timeout=30",
            then: "account required pam_permit.so\nsession required pam_permit.so")
        try Self.greeterServices(in: fixture.laptop.directory)

        let greeter = try LightDM(pamServiceDirectory: fixture.laptop.confdir)
        usleep(1_000_000)
        try greeter.type(user)
        let picture = try DesktopArtifacts.path("lightdm-approve-on-phone.png")
        var shown = ""
        #expect(
            try waitUntil(seconds: 20, every: 500_000) {
                try greeter.picture(to: picture)
                shown = try ScreenText.read(picture, in: fixture.laptop.directory)
                return shown.contains("/account")
            }, "\(shown)")
        let code = try #require(shown.firstMatch(of: /code (\d{6})/).map { String($0.1) }, "\(shown)")
        let page = try #require(shown.firstMatch(of: /http:\/\/\S+\/account/).map { String($0.0) }, "\(shown)")
        #expect(page == "\(manager.browserURL)/account", "the line names the manager's account page")

        let approved = try phone.approveWaiting(at: page, code: code, pin: "24680")
        #expect(approved.status == "Approved. The login to web1.example.org goes on.", "\(approved)")
        #expect(
            approved.list("waiting").first?.hasPrefix("\(user) on web1.example.org (lightdm)") == true, "\(approved)")
        #expect(
            try waitUntil(seconds: 20) { greeter.authentications(of: user, ending: "Success") == 1 },
            "\(greeter.log.suffix(1500))")
    }

    /// The laptop at its greeter with the network gone: the TPM checks the PIN. A wrong one is refused and counted by the
    /// TPM; the right one logs in.
    @Test func offlineTheTPMChecksThePINAtTheGreeter() throws {
        let (fixture, tpm) = try PAMFixture.offlineLaptop()
        try Self.services(fixture)
        let greeter = try LightDM(pamServiceDirectory: fixture.confdir)
        usleep(1_000_000)
        try greeter.type("nobody")
        #expect(
            try waitUntil(seconds: 20) { greeter.conversations(of: "nobody") > 0 && greeter.isAsking })
        try greeter.type("13570")
        #expect(
            try waitUntil(seconds: 20) { greeter.authentications(of: "nobody", ending: "Authentication failure") == 1 },
            "\(greeter.log.suffix(1500))"
        )
        #expect(try tpm.lockoutCounter() == 1, "the TPM judged the wrong PIN")
        usleep(1_000_000)
        try greeter.picture(to: try DesktopArtifacts.path("lightdm-offline-wrong-pin.png"))

        #expect(try greeter.askAgain(as: "nobody"), "\(greeter.log.suffix(1500))")
        try greeter.type("24680")
        #expect(
            try waitUntil(seconds: 20) { greeter.authentications(of: "nobody", ending: "Success") == 1 },
            "\(greeter.log.suffix(1500))")
        let events = (try PAMOfflineLoginTests.record(fixture)["events"] as? [[String: Any]] ?? []).map {
            $0["kind"] as? String ?? ""
        }
        #expect(events == ["wrongPIN", "login"], "both wait for the report: \(events)")
    }
}
