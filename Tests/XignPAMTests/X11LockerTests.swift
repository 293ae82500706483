import Foundation
import Testing
import XignTestSupport

/// xscreensaver 6 and cinnamon-screensaver 5.6 under Xvfb, run as the user as a desktop runs them, reaching the key
/// through xignd. Both read their PAM service from /etc/pam.d (xscreensaver-auth is setuid root, so pam_wrapper cannot
/// reach it; it drops to the user before PAM), so each runs in a private mount namespace where
/// /etc/pam.d/SERVICE is the fixture's file; the machine's own stack is untouched. Both refuse to lock for nobody, so
/// the user is a system user of the tests' own, made once.
struct X11Locker {
    enum Kind: String, CaseIterable, CustomTestStringConvertible {
        case xscreensaver
        case cinnamon = "cinnamon-screensaver"

        var service: String { rawValue }
        var testDescription: String { rawValue }

        /// What its dialog shows when it takes the PIN: xscreensaver shows the module's prompt; cinnamon-screensaver
        /// shows the user's name over a field of its own, whose text it hands to PAM's prompts once typed.
        var promptText: String { self == .xscreensaver ? "PIN for" : X11Locker.user }

        /// cinnamon-screensaver starts PAM once the PIN is typed into its field; xscreensaver starts it when woken, and
        /// shows what the module says (a message with its OK button, or the prompt).
        var takesThePINBeforePAM: Bool { self == .cinnamon }

        /// The window that is mapped while the screen is locked.
        var windowClass: String { self == .xscreensaver ? "XScreenSaver" : "Cinnamon-screensaver" }

        /// The locker's daemon; cinnamon-screensaver's in a session bus of its own, whose address it leaves in HOME.
        var daemon: [String] {
            switch self {
            case .xscreensaver: ["/usr/bin/xscreensaver", "-no-splash", "-verbose"]
            case .cinnamon:
                [
                    "/usr/bin/dbus-run-session", "--", "/bin/sh", "-c",
                    #"echo "$DBUS_SESSION_BUS_ADDRESS" > "$HOME/bus" && exec cinnamon-screensaver"#,
                ]
            }
        }

        /// What locks the screen, as the desktop's lock shortcut does.
        var lock: [String] {
            self == .xscreensaver
                ? ["/usr/bin/xscreensaver-command", "-lock"] : ["/usr/bin/cinnamon-screensaver-command", "--lock"]
        }
    }

    static let user = "xign-locker"

    let kind: Kind
    let display: VirtualDisplay
    let process: ChildProcess
    private let home = TemporaryDirectory()

    init(_ kind: Kind, fixture: PAMFixture) throws {
        try Self.makeUser()
        self.kind = kind
        display = try VirtualDisplay()
        // A black screen, not xscreensaver's graphics: they take a core each, and the tests run side by side.
        _ = try home.write(".xscreensaver", "mode: blank\nlock: True\nfade: False\nunfade: False\nsplash: False\n")
        _ = try ChildProcess("/usr/bin/chown", ["-R", Self.user, home.path], in: home).wait(timeout: 10)
        // The locker asks the account phase too; the rest of a real stack is pam_permit here.
        let serviceFile = fixture.confdir + "/" + kind.service
        let stack = try String(contentsOfFile: serviceFile, encoding: .utf8) + "account required pam_permit.so\n"
        // Read after the locker dropped to the user.
        try writeTestFile(serviceFile, Data(stack.utf8), mode: 0o644)
        let mountThenRun = #"mount --bind "$0" "$1" || exit 1; shift; exec "$@""#
        let command =
            ["/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", mountThenRun]
            + [serviceFile, "/etc/pam.d/\(kind.service)"] + (try fixture.atSeat(as: Self.user)) + kind.daemon
        let environment = ["DISPLAY": display.name, "HOME": home.path, "PATH": "/usr/bin:/bin"]
        process = try ChildProcess(
            command[0], Array(command.dropFirst()), environment: environment, in: fixture.directory)
        // Until it locks: a request made while the daemon still starts is lost.
        var asked = Date.distantPast
        var answers: [String] = []
        let locked = try waitUntil(seconds: 90) {
            if Date().timeIntervalSince(asked) > 5, let bus = try busEnvironment() {
                let lock = PAMFixture.runAs(Self.user) + kind.lock
                let answer = try ChildProcess(
                    lock[0], Array(lock.dropFirst()), environment: environment.merging(bus) { $1 }, in: home
                ).wait(timeout: 20)
                answers.append("\(answer.status): \(answer.stdout) \(answer.stderr)")
                asked = Date()
            }
            return try isLocked
        }
        guard locked else {
            throw TestFailure("\(kind.service) did not lock the screen; lock said \(answers); it said: \(said)")
        }
    }

    /// The session bus of cinnamon-screensaver once it is up; none needed for xscreensaver.
    private func busEnvironment() throws -> [String: String]? {
        guard kind == .cinnamon else { return [:] }
        guard let address = try? String(contentsOfFile: home.file("bus"), encoding: .utf8), address.hasSuffix("\n")
        else { return nil }
        return ["DBUS_SESSION_BUS_ADDRESS": address.trimmingCharacters(in: .newlines)]
    }

    var isLocked: Bool { get throws { try display.shows(class: kind.windowClass) } }

    func picture(_ name: String) throws {
        try display.picture(ofWindow: kind.windowClass, to: try DesktopArtifacts.path("\(kind.service)-\(name).png"))
    }

    /// The mouse wakes the dialog, as a person does; Return first takes xscreensaver's last message away (its OK).
    func wake(afterAMessage: Bool = true) throws {
        if afterAMessage && !kind.takesThePINBeforePAM { try display.xdotool(["key", "Return"]) }
        try display.xdotool(["mousemove", "10", "10", "mousemove", "400", "300"])
    }

    /// Wakes the dialog and types the PIN once it takes it (keys typed before are lost); a message before the prompt
    /// (offline, the TPM checks the PIN) is taken away first, as a person would. After failures xscreensaver waits
    /// longer each time before it takes input again (35 s seen after the second).
    func typePIN(_ pin: String) throws {
        let shot = home.file("prompt.png")
        var woken = Date.distantPast
        let asked = try waitUntil(seconds: 90, every: 200_000) {
            if Date().timeIntervalSince(woken) > 6 {
                try wake(afterAMessage: woken != .distantPast)
                woken = Date()
                usleep(1_000_000)
            }
            // xscreensaver makes its window anew at times: one gone between the search and the picture is looked for again.
            guard (try? display.picture(ofWindow: kind.windowClass, to: shot)) != nil else { return false }
            return try ScreenText.read(shot, in: home).contains(kind.promptText)
        }
        guard asked else {
            try? FileManager.default.copyItem(
                atPath: shot, toPath: try DesktopArtifacts.path("\(kind.service)-no-prompt-\(getpid()).png"))
            throw TestFailure("\(kind.service) took no PIN within 90 s; it said: \(said)")
        }
        try display.xdotool(["type", "--delay", "60", pin])
        try display.xdotool(["key", "Return"])
    }

    /// The end of what the locker logged.
    var said: String { String(((try? String(contentsOfFile: process.stderrPath, encoding: .utf8)) ?? "").suffix(3000)) }

    /// What a person does to try to unlock, until `happened`: the PIN where the locker takes it first, else waking it
    /// (the module then asks, or says why it cannot) as often as it takes: just after it locked, and after a failure,
    /// xscreensaver lets a moment pass before it wakes.
    func tryToUnlock(pin: String, until happened: () throws -> Bool) throws -> Bool {
        if kind.takesThePINBeforePAM {
            try typePIN(pin)
            return try waitUntil(seconds: 20, happened)
        }
        var woken = Date.distantPast
        return try waitUntil(seconds: 60) {
            if Date().timeIntervalSince(woken) > 6 {
                try wake()
                woken = Date()
            }
            return try happened()
        }
    }

    /// Waits until the screen is unlocked. xscreensaver shows the module's last word (offline: until when offline login
    /// lasts) with an OK before it unlocks, so Return takes it away, as a person would.
    func unlocked(within seconds: Double = 60) throws -> Bool {
        var acknowledged = Date()
        return try waitUntil(seconds: seconds) {
            if !kind.takesThePINBeforePAM && Date().timeIntervalSince(acknowledged) > 5 {
                try display.xdotool(["key", "Return"])
                acknowledged = Date()
            }
            return try !isLocked
        }
    }

    /// The tests' user, made once on this machine: `useradd` of a system user without a home or a shell.
    static func makeUser() throws {
        guard getpwnam(user) == nil else { return }
        _ = try ChildProcess(
            "/usr/sbin/useradd",
            [
                "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent", "--shell",
                "/usr/sbin/nologin", user,
            ],
            in: TemporaryDirectory()
        ).wait(timeout: 30)
        // Another test may have made it at the same moment.
        guard getpwnam(user) != nil else { throw TestFailure("cannot make the user \(user)") }
    }
}

/// Outside `make test` until they hold on a busy machine (XIGN_X11_LOCKERS=1 runs them): in whole runs xscreensaver
/// once answered "no screensaver is running on display :0" to every lock request for 90 s while its daemon ran, and
/// cinnamon-screensaver once showed no dialog to 15 wakes in 90 s; both passed when run again.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["XIGN_X11_LOCKERS"] == "1"))
struct X11LockerTests {
    static let email = "\(X11Locker.user)@example.org"

    @Test(arguments: X11Locker.Kind.allCases)
    func theUserUnlocksWithThePINAndAWrongPINKeepsTheScreenLocked(kind: X11Locker.Kind) throws {
        let (fixture, daemon) = try PAMFixture.locker(service: kind.service, user: X11Locker.user)
        let locker = try X11Locker(kind, fixture: fixture)
        try locker.picture("locked")
        try locker.typePIN("13570")
        #expect(
            try waitUntil(seconds: 20) { try fixture.failedAttempts(Self.email) == 1 },
            "the wrong PIN reached the manager: \(daemon.log)")
        try locker.picture("wrong-pin")
        #expect(try locker.isLocked, "a wrong PIN keeps the screen locked")

        try locker.typePIN("24680")
        #expect(try locker.unlocked(), "the locker unlocked: \(daemon.log)\n\(locker.said)")
        #expect(try fixture.completedLogins(X11Locker.user) == 1, "the manager recorded the login")
    }

    /// The laptop with the network gone: the TPM refuses a wrong PIN (counted) and accepts the right one.
    @Test(arguments: X11Locker.Kind.allCases)
    func offlineTheTPMChecksThePIN(kind: X11Locker.Kind) throws {
        let (fixture, daemon, tpm) = try PAMFixture.offlineLocker(service: kind.service, user: X11Locker.user)
        let locker = try X11Locker(kind, fixture: fixture)
        try locker.typePIN("13570")
        #expect(
            try waitUntil(seconds: 20) { try tpm.lockoutCounter() == 1 }, "the TPM judged the wrong PIN: \(daemon.log)")
        try locker.picture("offline-wrong-pin")
        #expect(try locker.isLocked)
        try locker.typePIN("24680")
        #expect(try locker.unlocked(), "the locker unlocked offline: \(daemon.log)\n\(locker.said)")
    }

    /// A manager that stalls: the locker has its answer within the module's timeout (3 s). failmode=secure keeps it
    /// locked and it takes the PIN again; failmode=safe hands over to the next line (pam_permit here), which unlocks.
    @Test(arguments: X11Locker.Kind.allCases, ["secure", "safe"])
    func aStalledManagerNeverHangsTheLocker(kind: X11Locker.Kind, failmode: String) throws {
        let (fixture, daemon, stalled) = try PAMFixture.stalledLocker(
            service: kind.service, failmode: failmode, user: X11Locker.user)
        let locker = try X11Locker(kind, fixture: fixture)
        func ended(_ word: String) -> Int {
            daemon.log.components(separatedBy: "result=\(word) service=\(kind.service)").count - 1
        }
        let word = failmode == "safe" ? "unreachable-ignored" : "unreachable"
        #expect(try locker.tryToUnlock(pin: "24680") { ended(word) == 1 }, "\(daemon.log)")
        #expect(!stalled.requests.isEmpty, "the module asked the stalled manager")
        if failmode == "safe" {
            #expect(try locker.unlocked(within: 15), "the next line unlocked: \(daemon.log)")
        } else {
            try locker.picture("manager-stalled-secure")
            #expect(try locker.isLocked, "secure: the screen stays locked")
            #expect(try locker.tryToUnlock(pin: "24680") { ended(word) == 2 }, "\(daemon.log)")
            #expect(try locker.isLocked)
        }
    }
}
