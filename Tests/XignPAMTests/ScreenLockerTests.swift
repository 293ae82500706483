import Foundation
import Testing
import XignTestSupport

/// Debian's i3lock under Xvfb, run as the user (nobody) as a desktop runs it, with its PAM service in a private
/// directory (pam_wrapper). The PIN is typed with xdotool; i3lock exits only when PAM says yes.
@Suite struct ScreenLockerTests {
    let fixture: PAMFixture
    let daemon: DaemonProcess
    let display: VirtualDisplay

    init() throws {
        (fixture, daemon) = try PAMFixture.locker(service: "i3lock")
        display = try VirtualDisplay()
    }

    /// i3lock on `display`, with the fixture's service files.
    struct Locker {
        let fixture: PAMFixture
        let display: VirtualDisplay

        func lock() throws -> ChildProcess {
            let environment = [
                "DISPLAY": display.name, "HOME": "/nonexistent", "PATH": "/usr/bin:/bin",
                "LD_PRELOAD": "libpam_wrapper.so", "PAM_WRAPPER": "1", "PAM_WRAPPER_SERVICE_DIR": fixture.confdir,
            ]
            // In the user's session at the seat, as a desktop starts its locker.
            let command = try fixture.atSeat("nobody") + PAMFixture.runAs("nobody") + ["/usr/bin/i3lock", "--nofork"]
            let locker = try ChildProcess(
                command[0], Array(command.dropFirst()), environment: environment, in: fixture.directory)
            try display.waitForWindow(class: "i3lock")
            return locker
        }

        func type(_ pin: String) throws {
            try display.xdotool(["type", "--delay", "40", pin])
            try display.xdotool(["key", "Return"])
        }
    }

    func lock() throws -> ChildProcess { try Locker(fixture: fixture, display: display).lock() }
    func type(_ pin: String) throws { try Locker(fixture: fixture, display: display).type(pin) }

    @Test func theUserUnlocksWithThePINAndAWrongPINKeepsTheScreenLocked() throws {
        let locker = try lock()
        try type("13570")
        #expect(
            try waitUntil(seconds: 15) { try fixture.failedAttempts("nobody@example.org") == 1 },
            "the wrong PIN reached the manager")
        usleep(1_000_000)
        #expect(locker.poll() == nil, "a wrong PIN keeps the screen locked")
        usleep(500_000)  // the manager's lock after one wrong PIN (300 ms in the test config)
        try type("24680")
        let result = try locker.wait(timeout: 30)
        #expect(result.status == 0, "i3lock unlocked: \(result.stderr) \(daemon.log)")
        #expect(try fixture.completedLogins("nobody") == 1, "the manager recorded the login")
    }

    @Test func xigndGoneMidRequestLeavesTheLockerLockedAndResponsive() throws {
        let slow = try FaultyServer.delaying(3, to: fixture.manager.port)
        try fixture.redirectEnrolments(to: slow.url)
        let locker = try lock()
        try type("24680")
        #expect(waitUntil(seconds: 15) { !slow.requests.isEmpty })
        daemon.kill()
        usleep(1_000_000)
        #expect(locker.poll() == nil, "without xignd the screen stays locked")
        try fixture.redirectEnrolments(to: fixture.manager.url.description, from: slow.url)
        try daemon.start()
        usleep(1_500_000)  // i3lock shows the failure for a moment before it takes input again
        try type("24680")
        let result = try locker.wait(timeout: 30)
        #expect(result.status == 0, "the locker did not hang on the lost daemon: \(result.stderr)")
    }
}

/// The unlock that happens most often without a network: i3lock as the user, through xignd, with the manager gone.
@Suite struct OfflineScreenLockerTests {
    @Test func theScreenUnlocksOfflineThroughXignd() throws {
        let (fixture, daemon, tpm) = try PAMFixture.offlineLocker(service: "i3lock")
        let display = try VirtualDisplay()
        let locker = ScreenLockerTests.Locker(fixture: fixture, display: display)

        let screen = try locker.lock()
        try locker.type("13570")
        #expect(
            try waitUntil(seconds: 15) { try tpm.lockoutCounter() == 1 }, "the TPM judged the wrong PIN: \(daemon.log)")
        usleep(1_000_000)
        #expect(screen.poll() == nil, "a wrong offline PIN keeps the screen locked")
        usleep(1_500_000)
        try locker.type("24680")
        let result = try screen.wait(timeout: 30)
        #expect(result.status == 0, "i3lock unlocked offline: \(result.stderr) \(daemon.log)")
        let events = (try PAMOfflineLoginTests.record(fixture)["events"] as? [[String: Any]] ?? []).map {
            $0["kind"] as? String ?? ""
        }
        #expect(events == ["wrongPIN", "login"], "both wait for the report: \(events)")
    }
}
