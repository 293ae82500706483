import Foundation

/// LightDM 1.26 with lightdm-gtk-greeter on Xvfb, as root in a DisplayManagerSandbox, for the greeter tests. Its PAM
/// services come from `pamServiceDirectory` (pam_wrapper), so the machine's /etc/pam.d is never used.
public final class LightDM: @unchecked Sendable {
    public let directory = TemporaryDirectory()
    private let sandbox: DisplayManagerSandbox

    /// Far above the displays other tests' Xvfb take (the first free from :0), which LightDM's check could race.
    static let displayNumber = 60

    public init(pamServiceDirectory: String) throws {
        for name in ["log", "run", "cache"] {
            try FileManager.default.createDirectory(atPath: directory.file(name), withIntermediateDirectories: true)
        }
        sandbox = try DisplayManagerSandbox(directory: directory)
        let config = try directory.write(
            "lightdm.conf",
            "[LightDM]\nlogind-check-graphical=false\nminimum-display-number=\(Self.displayNumber)\n[Seat:*]\nxserver-command=\(sandbox.xserver)\ngreeter-session=lightdm-gtk-greeter\n",
            mode: 0o644)
        try sandbox.run(
            "/usr/sbin/lightdm -c \(config) -d --log-dir \(directory.file("log")) --run-dir \(directory.file("run")) --cache-dir \(directory.file("cache"))",
            environment: [
                "LD_PRELOAD": "libpam_wrapper.so", "PAM_WRAPPER": "1", "PAM_WRAPPER_SERVICE_DIR": pamServiceDirectory,
            ])
        guard try waitUntil(seconds: 30, { self.log.contains("Prompt greeter") }) else {
            throw TestFailure("LightDM's greeter did not ask for a user: \(log.suffix(2000))")
        }
    }

    /// LightDM's own log (-d): the PAM conversation's shape and each authentication's result.
    public var log: String { (try? String(contentsOfFile: directory.file("log/lightdm.log"), encoding: .utf8)) ?? "" }

    /// The X display LightDM started, with the cookie that opens it.
    private func input() throws -> XDisplayInput {
        let cookies = (try? FileManager.default.contentsOfDirectory(atPath: directory.file("run/root"))) ?? []
        guard let display = cookies.first(where: { $0.hasPrefix(":") }) else {
            throw TestFailure("LightDM started no X server")
        }
        return XDisplayInput(
            environment: ["DISPLAY": display, "XAUTHORITY": directory.file("run/root/\(display)")], directory: directory
        )
    }

    /// Types `text` and Return into the greeter's focused entry.
    public func type(_ text: String) throws { try input().type(text) }

    /// Clicks at (`x`, `y`) on the 1280×800 screen and types `text` there in place of what the field held, then Return.
    public func retype(_ text: String, atX x: Int, y: Int) throws { try input().retype(text, atX: x, y: y) }

    public func picture(to path: String) throws { try input().picture(to: path) }

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

    /// After a refusal: lightdm-gtk-greeter starts over for `user` at once; where that conversation ended before it asked
    /// (the manager's lock after a wrong PIN), the person starts again from the name. False if nothing asks.
    public func askAgain(as user: String) throws -> Bool {
        usleep(1_000_000)
        return try isAsking || startAgain(as: user)
    }

    /// How many of `user`'s authentications LightDM saw end with `result` ("Success", "Authentication failure").
    public func authentications(of user: String, ending result: String) -> Int {
        log.components(separatedBy: "Authenticate result for user \(user): \(result)").count - 1
    }
}
