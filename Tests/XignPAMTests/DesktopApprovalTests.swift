import Foundation
import Testing
import XignProtocol
import XignTestSupport

/// A desktop session of the enrolled user (a person's account, as login names are): its own D-Bus session bus, Debian's dunst as the notification
/// server under Xvfb, and `xign-setup agent` waiting for logins through xignd. A server (a host) asks to confirm
/// a login for that user; the notification appears, its action opens the approval, and the approval, run as the
/// user, goes through xignd.
@Suite struct DesktopApprovalTests {
    let fixture: ConfirmationFixture
    let daemon: DaemonProcess
    let session: String
    /// xign-setup where the user may run it.
    let setup: String
    let user: String

    init() throws {
        user = try SSHServer.user.get()
        fixture = try ConfirmationFixture(user: user)
        try fixture.laptop.allowHostsWithoutRoot()
        daemon = try DaemonProcess(configPath: fixture.laptop.configPath, directory: fixture.laptop.directory)
        session = fixture.laptop.directory.file("session")
        try FileManager.default.createDirectory(atPath: session, withIntermediateDirectories: false)
        guard let account = getpwnam(user), chown(session, account.pointee.pw_uid, account.pointee.pw_gid) == 0 else {
            throw TestFailure("cannot give \(session) to \(user)")
        }
        setup = try fixture.laptop.copyForOtherUsers(try Products.path("xign-setup"))
    }

    /// `xign-setup` as the user, as a terminal in the desktop session runs it.
    func setupAsUser(
        _ arguments: [String], stdin: String? = nil, environment: [String: String] = [:]
    ) throws -> ChildProcess {
        let command = PAMFixture.runAs(user) + [setup] + arguments
        return try ChildProcess(
            command[0], Array(command.dropFirst()), stdin: stdin,
            environment: ["PATH": "/usr/bin:/bin", "HOME": session].merging(environment) { $1 },
            in: fixture.laptop.directory)
    }

    @Test func aPendingLoginShowsOneNotificationAndTheUserApprovesThroughXignd() throws {
        let desktop = try DesktopSession(user: user, directory: session)
        let opened = session + "/opened"
        let opener = try fixture.laptop.directory.write("open.sh", "#!/bin/sh\necho \"$@\" >> \(opened)\n", mode: 0o755)
        let agent = try setupAsUser(
            ["agent", "--xignd-socket", daemon.socketPath, "--open", opener], environment: desktop.environment)
        defer { agent.stop() }

        let login = try fixture.laptop.startLogin(user, answers: [])
        let code = try fixture.code(of: login)
        let shown = try desktop.waitForNotifications(count: 1)
        #expect(
            shown.count == 1
                && shown[0].hasPrefix(
                    "XignIn|Approve a login to web1.example.org?|\(user) wants to log in to web1.example.org (login)"),
            "\(shown) \((try? String(contentsOfFile: agent.stderrPath, encoding: .utf8)) ?? "")")
        #expect(!shown[0].contains(code), "the code stays on the server: typing it proves the user started this login")
        usleep(3_000_000)
        #expect(try desktop.notifications().count == 1, "the agent shows each login once, however often it asks")

        // Choosing the notification opens the approval with the login's payload.
        try desktop.run(["/usr/bin/dunstctl", "action", "0"])
        #expect(
            waitUntil(seconds: 15) { ((try? String(contentsOfFile: opened, encoding: .utf8)) ?? "").hasSuffix("\n") },
            "the notification's action opened nothing")
        let payload = try String(contentsOfFile: opened, encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines)
        #expect(ConfirmationPayload.confirmationId(in: payload) != nil, "\(payload)")

        let approval = try setupAsUser(
            ["approve", "--xignd-socket", daemon.socketPath, "--pin-stdin", payload], stdin: "\(code)\n24680\n"
        ).wait()
        #expect(approval.status == 0, "\(approval.stderr) \(daemon.log)")
        #expect(approval.stdout.contains("Approved: \(user) may log in to web1.example.org."), "\(approval.stdout)")
        #expect(try fixture.laptop.finish(login).code == PAMCode.success)
    }

    @Test func withoutXigndApproveSaysWhatToStart() throws {
        daemon.kill()
        let approval = try setupAsUser(
            ["approve", "--xignd-socket", daemon.socketPath, "--pin-stdin"], stdin: "123456\n24680\n"
        ).wait()
        #expect(approval.status == 1)
        #expect(
            approval.stderr.contains("without root, xign-setup needs xignd (systemctl enable --now xignd.socket)"),
            "\(approval.stderr)")
    }
}

/// A user's desktop session for tests: a D-Bus session bus and dunst on an Xvfb display, all running as `user`.
/// dunst runs a script for every notification, which records application, summary and body.
final class DesktopSession: @unchecked Sendable {
    let display: VirtualDisplay
    let directory: String
    let user: String
    private var processes: [ChildProcess] = []
    private let scratch = TemporaryDirectory()
    var bus: String { directory + "/bus" }
    var environment: [String: String] { ["DISPLAY": display.name, "DBUS_SESSION_BUS_ADDRESS": "unix:path=\(bus)"] }
    var log: String { directory + "/notifications.log" }

    init(user: String, directory: String) throws {
        self.user = user
        self.directory = directory
        display = try VirtualDisplay()
        let record = directory + "/record.sh"
        try writeTestFile(
            record, Data("#!/bin/sh\nprintf '%s|%s|%s\\n' \"$1\" \"$2\" \"$3\" >> \(log)\n".utf8), mode: 0o755)
        try writeTestFile(
            directory + "/dunstrc",
            Data("[global]\nfont = Monospace 8\n[xign]\nappname = XignIn\nscript = \(record)\n".utf8), mode: 0o644)
        processes.append(try start(["/usr/bin/dbus-daemon", "--session", "--nofork", "--address=unix:path=\(bus)"]))
        try wait("the session bus") { FileManager.default.fileExists(atPath: self.bus) }
        processes.append(try start(["/usr/bin/dunst", "-config", directory + "/dunstrc"]))
        try wait("dunst on the bus") {
            (try? self.run([
                "/usr/bin/dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus",
                "/org/freedesktop/DBus",
                "org.freedesktop.DBus.NameHasOwner", "string:org.freedesktop.Notifications",
            ]).stdout.contains("boolean true")) == true
        }
    }

    func start(_ command: [String]) throws -> ChildProcess {
        let full = PAMFixture.runAs(user) + command
        return try ChildProcess(
            full[0], Array(full.dropFirst()),
            environment: ["PATH": "/usr/bin:/bin", "HOME": directory].merging(environment) { $1 }, in: scratch)
    }

    @discardableResult
    func run(_ command: [String]) throws -> ChildProcess.Result { try start(command).wait(timeout: 30) }

    func notifications() throws -> [String] {
        ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    func waitForNotifications(count: Int, timeout: Double = 30) throws -> [String] {
        try wait("\(count) notification(s)", timeout: timeout) { (try? self.notifications().count) ?? 0 >= count }
        return try notifications()
    }

    private func wait(_ what: String, timeout: Double = 20, _ condition: () -> Bool) throws {
        guard waitUntil(seconds: timeout, condition) else { throw TestFailure("no \(what) within \(Int(timeout)) s") }
    }

    deinit { processes.reversed().forEach { $0.stop() } }
}
