import Foundation

/// LightDM 1.26 with lightdm-gtk-greeter on Xvfb, as root with a private system bus, for the greeter tests. Its PAM
/// services come from `pamServiceDirectory` (pam_wrapper), so the machine's /etc/pam.d is never used.
///
/// LightDM switches virtual terminals on /dev/tty0; it runs in a private mount namespace where /dev/tty0 is
/// /dev/null and /sys/class/tty is empty, so it cannot touch the machine's console. Xvfb refuses LightDM's VT
/// arguments, so a wrapper drops them.
public final class LightDM: @unchecked Sendable {
    public let directory = TemporaryDirectory()
    private var processes: [ChildProcess] = []

    /// Far above the displays other tests' Xvfb take (the first free from :0), which LightDM's check could race.
    static let displayNumber = 60

    public init(pamServiceDirectory: String) throws {
        for name in ["log", "run", "cache"] {
            try FileManager.default.createDirectory(atPath: directory.file(name), withIntermediateDirectories: true)
        }
        let bus = "unix:path=\(directory.file("bus"))"
        let busConfig = try directory.write(
            "bus.conf",
            """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig><type>system</type><listen>\(bus)</listen><auth>EXTERNAL</auth>
            <policy context="default"><allow user="*"/><allow own="*"/><allow send_destination="*"/><allow receive_sender="*"/></policy>
            </busconfig>
            """, mode: 0o644)
        processes.append(try ChildProcess("/usr/bin/dbus-daemon", ["--config-file=\(busConfig)", "--nofork"], in: directory))
        let xserver = try directory.write(
            "xserver",
            """
            #!/bin/sh
            args=""
            for a in "$@"; do case "$a" in vt*|-novtswitch) ;; *) args="$args $a";; esac; done
            exec /usr/bin/Xvfb $args -screen 0 1280x800x24
            """, mode: 0o755)
        let config = try directory.write(
            "lightdm.conf",
            "[LightDM]\nlogind-check-graphical=false\nminimum-display-number=\(Self.displayNumber)\n[Seat:*]\nxserver-command=\(xserver)\ngreeter-session=lightdm-gtk-greeter\n",
            mode: 0o644)
        let start = try directory.write(
            "start",
            """
            #!/bin/sh
            mount -t tmpfs tmpfs /sys/class/tty && mount --bind /dev/null /dev/tty0 || exit 1
            exec /usr/sbin/lightdm -c \(config) -d --log-dir \(directory.file("log")) --run-dir \(directory.file("run")) --cache-dir \(directory.file("cache"))
            """, mode: 0o755)
        guard try waitUntil(seconds: 10, { FileManager.default.fileExists(atPath: self.directory.file("bus")) }) else {
            throw TestFailure("the private system bus did not start")
        }
        let environment = [
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DBUS_SYSTEM_BUS_ADDRESS": bus,
            "LD_PRELOAD": "libpam_wrapper.so", "PAM_WRAPPER": "1", "PAM_WRAPPER_SERVICE_DIR": pamServiceDirectory,
        ]
        processes.append(
            try ChildProcess("/usr/bin/unshare", ["--mount", "--propagation", "private", start], environment: environment, in: directory))
        guard try waitUntil(seconds: 30, { self.log.contains("Prompt greeter") }) else {
            throw TestFailure("LightDM's greeter did not ask for a user: \(log.suffix(2000))")
        }
    }

    deinit { for process in processes.reversed() { process.stop() } }

    /// LightDM's own log (-d): the PAM conversation's shape and each authentication's result.
    public var log: String { (try? String(contentsOfFile: directory.file("log/lightdm.log"), encoding: .utf8)) ?? "" }

    /// The X display LightDM started, and the cookie that opens it.
    private func display() throws -> [String: String] {
        let cookies = (try? FileManager.default.contentsOfDirectory(atPath: directory.file("run/root"))) ?? []
        guard let display = cookies.first(where: { $0.hasPrefix(":") }) else { throw TestFailure("LightDM started no X server") }
        return ["DISPLAY": display, "XAUTHORITY": directory.file("run/root/\(display)"), "PATH": "/usr/bin:/bin"]
    }

    /// Types `text` and Return into the greeter's focused entry, with xdotool.
    public func type(_ text: String) throws {
        for arguments in (text.isEmpty ? [] : [["type", "--delay", "40", text]]) + [["key", "Return"]] {
            let result = try ChildProcess("/usr/bin/xdotool", arguments, environment: try display(), in: directory).wait(timeout: 30)
            guard result.status == 0 else { throw TestFailure("xdotool: \(result.stderr)") }
        }
    }

    /// Clicks at (`x`, `y`) on the 1280×800 screen and types `text` there in place of what the field held, then Return.
    public func retype(_ text: String, atX x: Int, y: Int) throws {
        let result = try ChildProcess(
            "/usr/bin/xdotool", ["mousemove", "\(x)", "\(y)", "click", "1", "key", "ctrl+a", "type", "--delay", "40", text],
            environment: try display(), in: directory
        ).wait(timeout: 30)
        guard result.status == 0 else { throw TestFailure("xdotool: \(result.stderr)") }
        try type("")
    }

    /// Saves the screen as a PNG at `path` (ImageMagick's import).
    public func picture(to path: String) throws {
        let result = try ChildProcess("/usr/bin/import", ["-window", "root", path], environment: try display(), in: directory).wait(timeout: 30)
        guard result.status == 0 else { throw TestFailure("import: \(result.stderr)") }
    }

    /// Whether LightDM waits on the greeter: its PAM conversation asked something and has no answer yet.
    public var isAsking: Bool { log.hasSuffix("Prompt greeter with 1 message(s)\n") }

    /// How many PAM conversations LightDM started for `user`.
    public func conversations(of user: String) -> Int { log.components(separatedBy: "username '\(user)'").count - 1 }

    /// Starts again from the name, as a person does once the greeter has no conversation left behind its fields: types
    /// `user` into the name field and waits (20 s) until that user's new conversation asks. False if it never does.
    public func startAgain(as user: String) throws -> Bool {
        let started = conversations(of: user)
        try retype(user, atX: 688, y: 342)
        return waitUntil(seconds: 20) { conversations(of: user) > started && isAsking }
    }

    /// How many of `user`'s authentications LightDM saw end with `result` ("Success", "Authentication failure").
    public func authentications(of user: String, ending result: String) -> Int {
        log.components(separatedBy: "Authenticate result for user \(user): \(result)").count - 1
    }
}
