import Foundation

/// sway 1.7 with its headless backend, run as `user` (sway refuses root) with a runtime directory of that user's,
/// for Wayland lockers under test: programs are started in it, typed at with wtype (the virtual-keyboard protocol)
/// and photographed with grim, as a person at the desk would see them.
public final class HeadlessSway: @unchecked Sendable {
    public let directory = TemporaryDirectory()
    public let user: String
    private let runtime: String
    private var process: ChildProcess?

    /// `prefix` runs a command as `user` (in that user's session at the seat, as a desktop's own programs are).
    public init(user: String, prefix: [String]) throws {
        self.user = user
        runtime = directory.file("runtime")
        guard chmod(directory.path, 0o755) == 0 else { throw TestFailure("cannot open \(directory.path)") }
        try FileManager.default.createDirectory(
            atPath: runtime, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let owner = try ChildProcess("/usr/bin/chown", [user, runtime], in: directory).wait(timeout: 10)
        guard owner.status == 0 else { throw TestFailure("chown \(runtime): \(owner.stderr)") }
        // Clients repeat held keys themselves; on a busy machine a key's release can come late, so no repeat at all.
        let config = try directory.write(
            "config", "output HEADLESS-1 resolution 1280x800\ninput * repeat_delay 10000\ninput * repeat_rate 1\n",
            mode: 0o644)
        var environment = baseEnvironment
        environment["WLR_BACKENDS"] = "headless"
        environment["WLR_LIBINPUT_NO_DEVICES"] = "1"
        environment["WLR_RENDERER"] = "pixman"
        process = try ChildProcess(
            prefix[0], Array(prefix.dropFirst()) + ["/usr/bin/sway", "-c", config], environment: environment,
            in: directory)
        guard try waitUntil(seconds: 20, { FileManager.default.fileExists(atPath: self.runtime + "/wayland-1") }) else {
            throw TestFailure("sway did not start: \(process?.poll()?.stderr ?? "still running, no socket")")
        }
    }

    deinit { process?.stop() }

    var baseEnvironment: [String: String] {
        ["PATH": "/usr/bin:/bin", "HOME": directory.path, "XDG_RUNTIME_DIR": runtime]
    }

    /// What a program in this session gets: the Wayland display, and `extra`.
    public func environment(_ extra: [String: String] = [:]) -> [String: String] {
        baseEnvironment.merging(["WAYLAND_DISPLAY": "wayland-1"]) { $1 }.merging(extra) { $1 }
    }

    /// Starts `command` in the session; `prefix` runs it as the user.
    public func start(
        _ command: [String], prefix: [String], environment extra: [String: String] = [:]
    ) throws -> ChildProcess {
        let full = prefix + command
        return try ChildProcess(full[0], Array(full.dropFirst()), environment: environment(extra), in: directory)
    }

    /// Types `text`, then Return, into the focused surface. One wtype for all: each makes a virtual keyboard whose
    /// keymap the client takes in with the first key, which it then loses; a Shift goes first to be that key.
    public func type(_ text: String) throws {
        try client(["/usr/bin/wtype", "-d", "20", "-k", "Shift_L", text, "-k", "Return"])
    }

    /// Saves what the screen shows now as a PNG at `path`.
    public func picture(to path: String) throws {
        let shot = runtime + "/picture.png"
        try client(["/usr/bin/grim", shot])
        try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.copyItem(atPath: shot, toPath: path)
    }

    private func client(_ command: [String]) throws {
        let full =
            [
                "/usr/bin/setpriv", "--reuid=\(user)", "--regid=\(user == "nobody" ? "nogroup" : user)",
                "--clear-groups", "--",
            ] + command
        let result = try ChildProcess(full[0], Array(full.dropFirst()), environment: environment(), in: directory).wait(
            timeout: 20)
        guard result.status == 0 else { throw TestFailure("\(command[0]) failed: \(result.stderr)") }
    }
}
