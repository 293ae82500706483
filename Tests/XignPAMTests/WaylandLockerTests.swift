import Foundation
import Testing
import XignTestSupport

/// Debian's swaylock 1.7 in sway's headless session, run as the user (nobody) as a Wayland desktop runs it, through
/// xignd; its PAM service (`swaylock`) in a private directory (pam_wrapper). Typed with wtype, photographed with grim.
struct Swaylock {
    let sway: HeadlessSway
    let process: ChildProcess

    init(_ fixture: PAMFixture) throws {
        let seat = try fixture.atSeat(as: "nobody")
        sway = try HeadlessSway(user: "nobody", prefix: seat)
        let pamWrapper = [
            "LD_PRELOAD": "libpam_wrapper.so", "PAM_WRAPPER": "1", "PAM_WRAPPER_SERVICE_DIR": fixture.confdir,
        ]
        process = try sway.start(
            [
                "/usr/bin/swaylock", "--debug", "--color", "203040", "--indicator-idle-visible",
                "--show-failed-attempts",
            ], prefix: seat,
            environment: pamWrapper)
        guard try waitUntil(seconds: 20, { log.contains("Prepared to authorize") }) else {
            throw TestFailure("swaylock did not start: \(log)")
        }
    }

    var log: String { (try? String(contentsOfFile: process.stderrPath, encoding: .utf8)) ?? "" }
    var isLocked: Bool { process.poll() == nil }
    /// How many times swaylock asked PAM.
    var checks: Int { log.components(separatedBy: "received pw check request").count - 1 }

    /// Types `pin` until swaylock asks PAM with it: keys before its surface takes the keyboard are lost, and it logs
    /// nothing when that happens.
    func submit(_ pin: String) throws -> Bool {
        let before = checks
        return try waitUntil(seconds: 30, every: 3_000_000) {
            if checks == before { try sway.type(pin) }
            return checks > before || !isLocked
        }
    }

    /// Waits until swaylock ends, and whether it ended unlocked.
    func unlocked(within seconds: Double = 30) throws -> Bool {
        guard waitUntil(seconds: seconds, { !isLocked }) else { return false }
        return try process.wait(timeout: 10).status == 0
    }

    func picture(_ name: String) throws { try sway.picture(to: try DesktopArtifacts.path(name)) }
}

@Suite struct SwaylockTests {
    @Test func theUserUnlocksWithThePINAndAWrongPINKeepsTheScreenLocked() throws {
        let (fixture, daemon) = try PAMFixture.locker(service: "swaylock")
        let locker = try Swaylock(fixture)
        try locker.picture("swaylock-locked.png")
        #expect(try locker.submit("13570"))
        #expect(
            try waitUntil(seconds: 10) { try fixture.failedAttempts("nobody@example.org") == 1 },
            "the wrong PIN reached the manager")
        #expect(try waitUntil(seconds: 10) { locker.log.contains("pam_authenticate failed") })
        try locker.picture("swaylock-wrong-pin.png")
        #expect(locker.isLocked, "a wrong PIN keeps the screen locked")

        usleep(1_500_000)  // swaylock shows "wrong" for a moment; the manager's lock after one wrong PIN is 300 ms here
        #expect(try locker.submit("24680"))
        #expect(try locker.unlocked(), "swaylock unlocked: \(locker.log.suffix(2000)) \(daemon.log)")
        #expect(locker.checks == 2)
        #expect(try fixture.completedLogins("nobody") == 1, "the manager recorded the login")
        try locker.picture("swaylock-unlocked.png")
    }

    /// The laptop with the network gone: the TPM refuses a wrong PIN (counted) and accepts the right one.
    @Test func offlineTheTPMChecksThePIN() throws {
        let (fixture, daemon, tpm) = try PAMFixture.offlineLocker(service: "swaylock")
        let locker = try Swaylock(fixture)
        #expect(try locker.submit("13570"))
        #expect(
            try waitUntil(seconds: 20) { try tpm.lockoutCounter() == 1 }, "the TPM judged the wrong PIN: \(daemon.log)")
        #expect(try waitUntil(seconds: 10) { locker.log.contains("pam_authenticate failed") })
        #expect(locker.isLocked)
        usleep(1_500_000)
        #expect(try locker.submit("24680"))
        #expect(try locker.unlocked(), "swaylock unlocked offline: \(locker.log.suffix(2000)) \(daemon.log)")
    }

    /// A manager that stalls: swaylock has its answer within the module's timeout (3 s) and takes input again;
    /// failmode=secure keeps it locked, failmode=safe hands over to the next line (pam_permit here).
    @Test(arguments: ["secure", "safe"]) func aStalledManagerNeverHangsTheLocker(failmode: String) throws {
        let (fixture, daemon, stalled) = try PAMFixture.stalledLocker(service: "swaylock", failmode: failmode)
        let locker = try Swaylock(fixture)
        #expect(try locker.submit("24680"))
        #expect(waitUntil(seconds: 15) { !stalled.requests.isEmpty }, "the module asked the stalled manager")
        if failmode == "safe" {
            #expect(try locker.unlocked(within: 15), "the next line unlocked: \(daemon.log)")
            return
        }
        #expect(try waitUntil(seconds: 10) { locker.log.contains("pam_authenticate failed") }, "\(daemon.log)")
        try locker.picture("swaylock-manager-stalled.png")
        usleep(1_500_000)
        #expect(try locker.submit("24680"), "swaylock takes the PIN again")
        #expect(
            try waitUntil(seconds: 10) { locker.log.components(separatedBy: "pam_authenticate failed").count == 3 },
            "\(daemon.log)")
        #expect(locker.isLocked, "secure: the screen stays locked")
    }
}
