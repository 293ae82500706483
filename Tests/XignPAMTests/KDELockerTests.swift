import Foundation
import Testing
import XignTestSupport

/// KDE Plasma 5.27's locker (kscreenlocker_greet --testing, with plasma-workspace for its Breeze screen) under Xvfb, as
/// the user (nobody) through xignd; Debian ships no /etc/pam.d/kde, so its `kde` service is the fixture's.
struct KDELocker {
    let display: VirtualDisplay
    let process: ChildProcess
    private let home = TemporaryDirectory()

    init(_ fixture: PAMFixture) throws {
        display = try VirtualDisplay()
        _ = try ChildProcess("/usr/bin/chown", ["nobody", home.path], in: home).wait(timeout: 10)
        let environment = [
            "DISPLAY": display.name, "HOME": home.path, "PATH": "/usr/bin:/bin",
            "LD_PRELOAD": "libpam_wrapper.so", "PAM_WRAPPER": "1", "PAM_WRAPPER_SERVICE_DIR": fixture.confdir,
        ]
        let command =
            try fixture.atSeat(as: "nobody") + [
                "/usr/bin/dbus-run-session", "--", "/usr/lib/x86_64-linux-gnu/libexec/kscreenlocker_greet", "--testing",
            ]
        process = try ChildProcess(
            command[0], Array(command.dropFirst()), environment: environment, in: fixture.directory)
        try display.waitForWindow(class: "kscreenlocker_greet", timeout: 60)
        usleep(3_000_000)  // the Breeze screen draws after the window maps
    }

    /// A key wakes the prompt (it hides again when idle); the field keeps what a failed attempt typed, so replace it.
    func typePIN(_ pin: String) throws {
        try display.xdotool(["key", "shift"])
        usleep(2_000_000)
        try display.xdotool(["key", "ctrl+a"])
        try display.xdotool(["type", "--delay", "60", pin])
        try display.xdotool(["key", "Return"])
    }

    var isLocked: Bool { process.poll() == nil }

    /// Waits until the locker ends, and whether it ended unlocked.
    func unlocked(within seconds: Double = 30) throws -> Bool {
        guard waitUntil(seconds: seconds, { !isLocked }) else { return false }
        return try process.wait(timeout: 10).status == 0
    }
}

@Suite struct KDELockerTests {
    @Test func theUserUnlocksWithThePINAndAWrongPINKeepsTheScreenLocked() throws {
        let (fixture, daemon) = try PAMFixture.locker(service: "kde")
        let locker = try KDELocker(fixture)
        try locker.display.picture(to: try DesktopArtifacts.path("kde-locked.png"))
        try locker.typePIN("13570")
        #expect(
            try waitUntil(seconds: 20) { try fixture.failedAttempts("nobody@example.org") == 1 },
            "the wrong PIN reached the manager: \(daemon.log)")
        usleep(2_000_000)
        try locker.display.picture(to: try DesktopArtifacts.path("kde-wrong-pin.png"))
        #expect(locker.isLocked, "a wrong PIN keeps the screen locked")

        try locker.typePIN("24680")
        #expect(try locker.unlocked(), "the locker unlocked: \(daemon.log)")
        #expect(try fixture.completedLogins("nobody") == 1, "the manager recorded the login")
    }

    /// The laptop with the network gone: the TPM refuses a wrong PIN (counted) and accepts the right one.
    @Test func offlineTheTPMChecksThePIN() throws {
        let (fixture, daemon, tpm) = try PAMFixture.offlineLocker(service: "kde")
        let locker = try KDELocker(fixture)
        try locker.typePIN("13570")
        #expect(
            try waitUntil(seconds: 20) { try tpm.lockoutCounter() == 1 }, "the TPM judged the wrong PIN: \(daemon.log)")
        usleep(2_000_000)
        try locker.display.picture(to: try DesktopArtifacts.path("kde-offline-wrong-pin.png"))
        #expect(locker.isLocked)
        try locker.typePIN("24680")
        #expect(try locker.unlocked(), "the locker unlocked offline: \(daemon.log)")
    }

    /// A manager that stalls: the locker has its answer within the module's timeout (3 s) and takes input again.
    /// failmode=secure keeps it locked; failmode=safe hands over to the next line (pam_permit here), which asks nothing,
    /// so the locker shows its Unlock button, and a click unlocks.
    @Test(arguments: ["secure", "safe"]) func aStalledManagerNeverHangsTheLocker(failmode: String) throws {
        let (fixture, daemon, stalled) = try PAMFixture.stalledLocker(service: "kde", failmode: failmode)
        let locker = try KDELocker(fixture)
        try locker.typePIN("24680")
        #expect(waitUntil(seconds: 15) { !stalled.requests.isEmpty }, "the module asked the stalled manager")
        func ended(_ word: String) -> Int { daemon.log.components(separatedBy: "result=\(word) service=kde").count - 1 }
        #expect(
            waitUntil(seconds: 10) { ended(failmode == "safe" ? "unreachable-ignored" : "unreachable") == 1 },
            "\(daemon.log)")
        usleep(2_000_000)
        try locker.display.picture(to: try DesktopArtifacts.path("kde-manager-stalled-\(failmode).png"))
        #expect(locker.isLocked)
        if failmode == "safe" {
            try locker.display.xdotool(["mousemove", "400", "374", "click", "1"])
            #expect(try locker.unlocked(within: 15), "the Unlock button unlocked: \(daemon.log)")
        } else {
            // The locker takes the PIN again, and again gets its answer within the timeout.
            try locker.typePIN("24680")
            #expect(waitUntil(seconds: 10) { ended("unreachable") == 2 }, "\(daemon.log)")
            #expect(locker.isLocked, "secure: the screen stays locked")
        }
    }
}
