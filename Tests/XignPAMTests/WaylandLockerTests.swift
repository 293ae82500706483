import Foundation
import Testing
import XignTestSupport

/// Debian's swaylock 1.7 in sway's headless session, run as the user (nobody) as a Wayland desktop runs it, through
/// xignd; its PAM service (`swaylock`) in a private directory (pam_wrapper). Typed with wtype, photographed with grim.
@Suite struct SwaylockTests {
    @Test func theUserUnlocksWithThePINAndAWrongPINKeepsTheScreenLocked() throws {
        let (fixture, daemon) = try PAMFixture.locker(service: "swaylock")
        let seat = try fixture.atSeat(as: "nobody")
        let sway = try HeadlessSway(user: "nobody", prefix: seat)
        let pamWrapper = ["LD_PRELOAD": "libpam_wrapper.so", "PAM_WRAPPER": "1", "PAM_WRAPPER_SERVICE_DIR": fixture.confdir]
        let locker = try sway.start(
            ["/usr/bin/swaylock", "--debug", "--color", "203040", "--indicator-idle-visible", "--show-failed-attempts"], prefix: seat,
            environment: pamWrapper)
        func log() -> String { (try? String(contentsOfFile: locker.stderrPath, encoding: .utf8)) ?? "" }
        #expect(try waitUntil(seconds: 20) { log().contains("Prepared to authorize") })
        try sway.picture(to: try DesktopArtifacts.path("swaylock-locked.png"))

        // swaylock logs nothing when its surface takes the keyboard, and keys before that are lost: type until PAM is asked.
        #expect(
            try waitUntil(seconds: 30, every: 3_000_000) {
                if !log().contains("received pw check request") { try sway.type("13570") }
                return try fixture.failedAttempts("nobody@example.org") == 1
            }, "the wrong PIN reached the manager")
        #expect(try waitUntil(seconds: 10) { log().contains("pam_authenticate failed") })
        try sway.picture(to: try DesktopArtifacts.path("swaylock-wrong-pin.png"))
        #expect(locker.poll() == nil, "a wrong PIN keeps the screen locked")

        usleep(1_500_000)  // swaylock shows "wrong" for a moment; the manager's lock after one wrong PIN is 300 ms here
        func checks() -> Int { log().components(separatedBy: "received pw check request").count - 1 }
        #expect(
            try waitUntil(seconds: 30, every: 3_000_000) {
                if locker.poll() != nil { return true }
                if checks() == 1 { try sway.type("24680") }
                return false
            }, "swaylock did not end: \(log().suffix(2000)) \(daemon.log)")
        let result = try locker.wait(timeout: 10)
        #expect(result.status == 0 && checks() == 2, "swaylock unlocked at the second check: \(result.stderr.suffix(2000)) \(daemon.log)")
        #expect(try fixture.completedLogins("nobody") == 1, "the manager recorded the login")
        try sway.picture(to: try DesktopArtifacts.path("swaylock-unlocked.png"))
    }
}
