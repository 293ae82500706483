import Foundation
import Testing
import XignTestSupport

/// SDDM 0.19 with Debian's theme, for real: its helper runs PAM as root with the `sddm` service, so the module logs in as
/// it does for login. The PIN is typed into the greeter's password field with xdotool, and each step is photographed.
///
/// SDDM asks for the password before PAM starts and answers every prompt of the conversation with it; it shows none of
/// PAM's text (its daemon logs info messages only, and turns an error message into "Login failed"). So the PIN is the
/// password, every refusal reads "Login failed", and confirm mode, whose code is an info message, cannot be used there.
@Suite(.serialized) struct SDDMTests {
    /// SDDM for the fixture's user, with the `sddm` service holding the module (`arguments`) and `then` after it; returned
    /// once the theme has drawn, which it does after the greeter connects.
    static func greeter(_ fixture: PAMFixture, arguments: String = "", then: String = "") throws -> SDDM {
        try fixture.service(
            "sddm", arguments: arguments, then: then + "account required pam_permit.so\nsession required pam_permit.so")
        let greeter = try SDDM(user: "nobody", pamServiceDirectory: fixture.confdir)
        usleep(2_000_000)
        return greeter
    }

    @Test func theGreeterRefusesAWrongPINAndLogsInWithTheRightOne() throws {
        let fixture = try PAMFixture(users: ["nobody"])
        let greeter = try Self.greeter(fixture)
        defer {
            try? greeter.log.write(toFile: try DesktopArtifacts.path("sddm.log"), atomically: true, encoding: .utf8)
        }
        try greeter.picture(to: try DesktopArtifacts.path("sddm-greeter.png"))

        try greeter.type("13570")
        #expect(waitUntil(seconds: 20) { greeter.failedLogins == 1 }, "\(greeter.log.suffix(1500))")
        #expect(try fixture.failedAttempts("nobody@example.org") == 1, "the wrong PIN reached the manager")
        #expect(!greeter.sessionStarted)
        // The module's error message reached SDDM, which logs it and shows only "Login failed".
        #expect(greeter.log.contains("Authentication error: \"Wrong PIN."), "\(greeter.log.suffix(1500))")
        #expect(try greeter.waitForFailureShown(), "\(greeter.log.suffix(1500))")
        try greeter.picture(to: try DesktopArtifacts.path("sddm-wrong-pin.png"))

        usleep(500_000)  // past the manager's lock after a wrong PIN (300 ms here)
        try greeter.type("24680")
        #expect(waitUntil(seconds: 20) { greeter.sessionStarted }, "\(greeter.log.suffix(1500))")
        #expect(greeter.failedLogins == 1)
        #expect(try fixture.completedLogins("nobody") == 1, "the manager recorded the login")
        #expect(try fixture.failedAttempts("nobody@example.org") == 0, "the right PIN cleared the count")
    }

    /// A manager that stalls: the greeter gets its answer within the module's timeout (3 s here) and never hangs.
    /// failmode=secure refuses; failmode=safe hands over to the next module (pam_permit, in place of a password).
    @Test(arguments: ["secure", "safe"]) func aStalledManagerNeverHangsTheGreeter(failmode: String) throws {
        let fixture = try PAMFixture(users: ["nobody"])
        let stalled = try FaultyServer.delaying(60, to: fixture.manager.port)
        try fixture.redirectEnrolments(to: stalled.url)
        let greeter = try Self.greeter(
            fixture, arguments: "timeout=3 failmode=\(failmode)",
            then: failmode == "safe" ? "auth required pam_permit.so\n" : "")
        try greeter.type("24680")
        let typed = Date()
        #expect(
            try waitUntil(seconds: 20) { failmode == "safe" ? greeter.sessionStarted : greeter.failedLogins == 1 },
            "\(greeter.log.suffix(1500))")
        let waited = Date().timeIntervalSince(typed)
        #expect(waited < 10, "the greeter waited \(waited) s for a 3 s timeout")
        #expect(!stalled.requests.isEmpty, "the module asked the stalled manager")
        #expect(greeter.sessionStarted == (failmode == "safe"))
        usleep(1_000_000)
        try greeter.picture(to: try DesktopArtifacts.path("sddm-manager-stalled-\(failmode).png"))
    }

    /// Confirm mode needs its code read, which SDDM cannot show: the module refuses at once and says why in the log,
    /// where a confirmation would leave the person before a silent greeter until it expired. The PIN login above is the
    /// control.
    @Test func confirmModeIsRefusedAtOnceWithTheReasonLogged() throws {
        let fixture = try ConfirmationFixture()
        try fixture.service(
            "sddm", arguments: "mode=confirm timeout=30",
            then: "account required pam_permit.so\nsession required pam_permit.so")
        let greeter = try SDDM(user: "nobody", pamServiceDirectory: fixture.laptop.confdir)
        usleep(2_000_000)
        let typed = Date()
        try greeter.type("anything")
        #expect(waitUntil(seconds: 20) { greeter.failedLogins == 1 }, "\(greeter.log.suffix(1500))")
        #expect(Date().timeIntervalSince(typed) < 10)
        #expect(!greeter.sessionStarted)
        #expect(greeter.log.contains("cannot show an approval code"), "\(greeter.log.suffix(1500))")
        #expect(
            try fixture.laptop.manager.query("SELECT count(*) FROM confirmations") == ["0"],
            "no confirmation was started")
    }

    /// A role that asks for a finger: SDDM cannot show the cue, but the finger on the reader after the PIN logs in, and
    /// another finger is refused.
    @Test func aRoleThatAsksForAFingerTakesOnlyTheEnrolledFinger() throws {
        let (fixture, reader) = try PAMFixture.greeterWithFinger()
        let greeter = try Self.greeter(fixture)
        try greeter.type("24680")
        try reader.scan("mallory")
        #expect(waitUntil(seconds: 20) { greeter.failedLogins == 1 }, "\(greeter.log.suffix(1500))")
        #expect(!greeter.sessionStarted)
        #expect(try greeter.waitForFailureShown(), "\(greeter.log.suffix(1500))")
        try greeter.type("24680")
        try reader.scan("nobody-right")
        #expect(waitUntil(seconds: 20) { greeter.sessionStarted }, "\(greeter.log.suffix(1500))")
    }

    /// The laptop at its greeter with the network gone: the TPM checks the PIN.
    @Test func offlineTheTPMChecksThePINAtTheGreeter() throws {
        let (fixture, tpm) = try PAMFixture.offlineLaptop()
        let greeter = try Self.greeter(fixture)
        try greeter.type("13570")
        #expect(waitUntil(seconds: 20) { greeter.failedLogins == 1 }, "\(greeter.log.suffix(1500))")
        #expect(try tpm.lockoutCounter() == 1, "the TPM judged the wrong PIN")
        #expect(try greeter.waitForFailureShown(), "\(greeter.log.suffix(1500))")
        try greeter.type("24680")
        #expect(waitUntil(seconds: 20) { greeter.sessionStarted }, "\(greeter.log.suffix(1500))")
        let events = (try PAMOfflineLoginTests.record(fixture)["events"] as? [[String: Any]] ?? []).map {
            $0["kind"] as? String ?? ""
        }
        #expect(events == ["wrongPIN", "login"], "both wait for the report: \(events)")
    }
}
