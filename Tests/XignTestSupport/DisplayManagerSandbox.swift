import Foundation

/// What a display manager needs to run here as root without touching the machine: a private system bus, an X server
/// command that runs Xvfb in place of Xorg, and a private mount namespace where /dev/tty0 is /dev/null and
/// /sys/class/tty is empty, so it cannot switch the machine's console. Xvfb refuses the VT arguments display managers
/// pass, so the command drops them.
final class DisplayManagerSandbox: @unchecked Sendable {
    let directory: TemporaryDirectory
    let busAddress: String
    let xserver: String
    private var processes: [ChildProcess] = []

    init(directory: TemporaryDirectory) throws {
        self.directory = directory
        busAddress = "unix:path=\(directory.file("bus"))"
        let busConfig = try directory.write(
            "bus.conf",
            """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig><type>system</type><listen>\(busAddress)</listen><auth>EXTERNAL</auth>
            <policy context="default"><allow user="*"/><allow own="*"/><allow send_destination="*"/><allow receive_sender="*"/></policy>
            </busconfig>
            """, mode: 0o644)
        processes.append(
            try ChildProcess("/usr/bin/dbus-daemon", ["--config-file=\(busConfig)", "--nofork"], in: directory))
        xserver = try directory.write(
            "xserver",
            """
            #!/bin/sh
            args=""
            for a in "$@"; do case "$a" in vt*|-novtswitch) ;; *) args="$args $a";; esac; done
            exec /usr/bin/Xvfb $args -screen 0 1280x800x24
            """, mode: 0o755)
        guard try waitUntil(seconds: 10, { FileManager.default.fileExists(atPath: directory.file("bus")) }) else {
            throw TestFailure("the private system bus did not start")
        }
    }

    /// Runs `command` as root in the private mount namespace, after the shell lines `mounts` (each must succeed).
    func run(_ command: String, mounts: [String] = [], environment: [String: String] = [:]) throws {
        let setUp = (["mount -t tmpfs tmpfs /sys/class/tty", "mount --bind /dev/null /dev/tty0"] + mounts).map {
            "\($0) || exit 1"
        }
        let start = try directory.write(
            "start", "#!/bin/sh\n" + setUp.joined(separator: "\n") + "\nexec \(command)\n", mode: 0o755)
        let environment = environment.merging([
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DBUS_SYSTEM_BUS_ADDRESS": busAddress,
        ]) { $1 }
        let process = try ChildProcess(
            "/usr/bin/unshare", ["--mount", "--propagation", "private", start], environment: environment, in: directory)
        processes.append(process)
        let own = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/mnt")
        _ = waitUntil(seconds: 10) {
            self.namespace = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(process.pid)/ns/mnt"))
                .flatMap {
                    $0 == own ? nil : $0
                }
            return self.namespace != nil
        }
        // Held open, the namespace outlives its processes, so its number cannot pass to another test's namespace while
        // deinit still looks for processes by it.
        if namespace != nil { namespaceHandle = open("/proc/\(process.pid)/ns/mnt", O_RDONLY | O_CLOEXEC) }
        if namespaceHandle >= 0,
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(namespaceHandle)"))
                != namespace
        {
            throw TestFailure("the display manager left its namespace before the test could hold it")
        }
    }

    /// Stops what runs in the namespace, including what left the process tree (SDDM under `script`), then the bus.
    deinit {
        if let namespace = namespace {
            for signal in [SIGTERM, SIGKILL] {
                let running = Self.processes(in: namespace)
                running.forEach { kill($0, signal) }
                _ = waitUntil(seconds: 5) { Self.processes(in: namespace).isEmpty }
            }
        }
        if namespaceHandle >= 0 { close(namespaceHandle) }
        for process in processes.reversed() { process.stop() }
    }

    /// The mount namespace `run` made, once its process has entered it.
    private var namespace: String?
    private var namespaceHandle: Int32 = -1

    private static func processes(in namespace: String) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { pid_t($0) }.filter {
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\($0)/ns/mnt")) == namespace
        }
    }
}

/// A person at an X display: typing, clicking and photographing with xdotool and ImageMagick.
struct XDisplayInput {
    /// DISPLAY and XAUTHORITY.
    let environment: [String: String]
    let directory: TemporaryDirectory

    /// Types `text` and Return into the focused entry.
    func type(_ text: String) throws {
        for arguments in (text.isEmpty ? [] : [["type", "--delay", "40", text]]) + [["key", "Return"]] {
            try xdotool(arguments)
        }
    }

    /// Clicks at (`x`, `y`) and types `text` there in place of what the field held, then Return.
    func retype(_ text: String, atX x: Int, y: Int) throws {
        try xdotool(["mousemove", "\(x)", "\(y)", "click", "1", "key", "ctrl+a", "type", "--delay", "40", text])
        try type("")
    }

    /// Saves the screen as a PNG at `path` (ImageMagick's import).
    func picture(to path: String) throws {
        let result = try ChildProcess(
            "/usr/bin/import", ["-window", "root", path], environment: processEnvironment, in: directory
        )
        .wait(timeout: 30)
        guard result.status == 0 else { throw TestFailure("import: \(result.stderr)") }
    }

    /// The text on the screen (ScreenText).
    func text() throws -> String {
        let picture = directory.file("screen.png")
        try self.picture(to: picture)
        return try ScreenText.read(picture, in: directory)
    }

    private var processEnvironment: [String: String] { environment.merging(["PATH": "/usr/bin:/bin"]) { $1 } }

    private func xdotool(_ arguments: [String]) throws {
        let result = try ChildProcess("/usr/bin/xdotool", arguments, environment: processEnvironment, in: directory)
            .wait(timeout: 30)
        guard result.status == 0 else { throw TestFailure("xdotool: \(result.stderr)") }
    }
}

/// What a person reads on a greeter's picture.
public enum ScreenText {
    /// The text on `picture`, read by tesseract from a grey copy three times the size (greeters' text is small).
    public static func read(_ picture: String, in directory: TemporaryDirectory) throws -> String {
        let large = directory.file("ocr.png")
        let converted = try ChildProcess(
            "/usr/bin/convert", [picture, "-colorspace", "Gray", "-resize", "300%", large], in: directory
        ).wait(timeout: 60)
        guard converted.status == 0 else { throw TestFailure("convert: \(converted.stderr)") }
        let result = try ChildProcess("/usr/bin/tesseract", [large, "-", "--psm", "11"], in: directory).wait(
            timeout: 60)
        guard result.status == 0 else { throw TestFailure("tesseract: \(result.stderr)") }
        return result.stdout
    }
}
