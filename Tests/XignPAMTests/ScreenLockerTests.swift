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
        fixture = try PAMFixture(users: ["nobody"])
        try fixture.allowHostsWithoutRoot()
        daemon = try DaemonProcess(configPath: fixture.configPath, directory: fixture.directory)
        try fixture.service("i3lock", arguments: "socket=\(daemon.socketPath)")
        display = try VirtualDisplay()
    }

    func lock() throws -> ChildProcess {
        let environment = [
            "DISPLAY": display.name, "HOME": "/nonexistent", "PATH": "/usr/bin:/bin",
            "LD_PRELOAD": "libpam_wrapper.so", "PAM_WRAPPER": "1", "PAM_WRAPPER_SERVICE_DIR": fixture.confdir,
        ]
        let command = PAMFixture.runAs("nobody") + ["/usr/bin/i3lock", "--nofork"]
        let locker = try ChildProcess(command[0], Array(command.dropFirst()), environment: environment, in: fixture.directory)
        try display.waitForWindow(class: "i3lock")
        return locker
    }

    func type(_ pin: String) throws {
        try display.xdotool(["type", "--delay", "40", pin])
        try display.xdotool(["key", "Return"])
    }

    @Test func theUserUnlocksWithThePINAndAWrongPINKeepsTheScreenLocked() throws {
        let locker = try lock()
        try type("13570")
        #expect(try waitUntil(seconds: 15) { try fixture.failedAttempts("nobody@example.org") == 1 }, "the wrong PIN reached the manager")
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
