import Foundation

/// An X server in memory (Xvfb) for desktop programs under test: screen lockers, notification servers.
public final class VirtualDisplay: @unchecked Sendable {
    /// `:N`, for DISPLAY.
    public let name: String
    private let process: ChildProcess
    private let directory = TemporaryDirectory()

    /// Starts Xvfb on a display number it picks itself (-displayfd), so parallel tests never collide. Access
    /// control is off (-ac) because the programs under test run as other users than the test.
    public init() throws {
        process = try ChildProcess(
            "/usr/bin/Xvfb", ["-displayfd", "1", "-ac", "-nolisten", "tcp", "-screen", "0", "800x600x24"], in: directory
        )
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let text = try? String(contentsOfFile: process.stdoutPath, encoding: .utf8), text.hasSuffix("\n"),
                let number = Int(text.trimmingCharacters(in: .whitespacesAndNewlines))
            {
                name = ":\(number)"
                return
            }
            if let result = process.poll() { throw TestFailure("Xvfb exited with \(result.status): \(result.stderr)") }
            usleep(20_000)
        }
        throw TestFailure("Xvfb did not start within 20 s")
    }

    /// Runs xdotool on this display.
    @discardableResult
    public func xdotool(_ arguments: [String]) throws -> ChildProcess.Result {
        try ChildProcess(
            "/usr/bin/xdotool", arguments, environment: ["DISPLAY": name, "PATH": "/usr/bin:/bin"], in: directory
        ).wait(timeout: 30)
    }

    /// Waits until a window of `windowClass` is mapped.
    public func waitForWindow(class windowClass: String, timeout: Double = 20) throws {
        let shown = try waitUntil(seconds: timeout, every: 100_000) {
            try xdotool(["search", "--onlyvisible", "--class", windowClass]).status == 0
        }
        guard shown else { throw TestFailure("no \(windowClass) window appeared on \(name) within \(Int(timeout)) s") }
    }

    /// Saves the screen as a PNG at `path` (ImageMagick's import).
    public func picture(to path: String) throws {
        let result = try ChildProcess(
            "/usr/bin/import", ["-window", "root", path], environment: ["DISPLAY": name, "PATH": "/usr/bin:/bin"],
            in: directory
        )
        .wait(timeout: 30)
        guard result.status == 0 else { throw TestFailure("import: \(result.stderr)") }
    }

    /// Saves the top window of `windowClass` as a PNG: a locker that draws for a compositor reads black from the root.
    public func picture(ofWindow windowClass: String, to path: String) throws {
        let found = try xdotool(["search", "--onlyvisible", "--class", windowClass])
        guard found.status == 0, let window = found.stdout.split(separator: "\n").last else {
            throw TestFailure("no \(windowClass) window on \(name) to photograph")
        }
        let result = try ChildProcess(
            "/usr/bin/import", ["-window", String(window), path],
            environment: ["DISPLAY": name, "PATH": "/usr/bin:/bin"],
            in: directory
        )
        .wait(timeout: 30)
        guard result.status == 0 else { throw TestFailure("import: \(result.stderr)") }
    }

    /// Whether a window of `windowClass` is mapped.
    public func shows(class windowClass: String) throws -> Bool {
        try xdotool(["search", "--onlyvisible", "--class", windowClass]).status == 0
    }

    deinit { process.stop() }
}
