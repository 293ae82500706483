import Foundation

/// SDDM 0.19 with Debian's theme on Xvfb, as root in a DisplayManagerSandbox, for the greeter tests.
///
/// SDDM reads only /etc/sddm.conf and starts its PAM helper with an environment of its own, so pam_wrapper cannot reach
/// it: in its mount namespace /etc is an overlay whose upper layer holds the test's sddm.conf, pam.d/sddm (copied from
/// `pamServiceDirectory`) and a passwd where `user` has a home and a shell here. The greeter lists that user alone, so
/// its password field has the focus. SDDM writes its log to a file only when its stdin is a terminal (else to the
/// journal), hence `script`; /var/log is the test's directory there.
public final class SDDM: @unchecked Sendable {
    public let directory = TemporaryDirectory()
    private let sandbox: DisplayManagerSandbox
    private let home: String

    public init(user: String, pamServiceDirectory: String) throws {
        guard let account = getpwnam(user) else { throw TestFailure("no user \(user)") }
        let (uid, gid) = (account.pointee.pw_uid, account.pointee.pw_gid)
        // The session runs as `user`, from files here.
        guard chmod(directory.path, 0o755) == 0 else { throw TestFailure("chmod \(directory.path)") }
        home = directory.file("home")
        for name in ["log", "etc/pam.d", "work", "xsessions", "wayland-sessions", "home"] {
            try FileManager.default.createDirectory(atPath: directory.file(name), withIntermediateDirectories: true)
        }
        guard chown(home, uid, gid) == 0 else { throw TestFailure("chown \(home)") }
        sandbox = try DisplayManagerSandbox(directory: directory)

        let passwd = try String(contentsOfFile: "/etc/passwd", encoding: .utf8).split(separator: "\n").map { line in
            line.hasPrefix("\(user):") ? "\(user):x:\(uid):\(gid):\(user):\(home):/bin/sh" : String(line)
        }
        _ = try directory.write("etc/passwd", passwd.joined(separator: "\n") + "\n", mode: 0o644)
        let service = try String(contentsOfFile: pamServiceDirectory + "/sddm", encoding: .utf8)
        _ = try directory.write("etc/pam.d/sddm", service, mode: 0o644)
        _ = try directory.write(
            "etc/pam.d/sddm-greeter",
            "auth required pam_permit.so\naccount required pam_permit.so\nsession required pam_permit.so\n", mode: 0o644
        )
        // The session: it records who it runs as, and stays.
        let session = try directory.write(
            "session", "#!/bin/sh\nid -un > \"$HOME/session-started\"\nexec sleep 600\n", mode: 0o755)
        _ = try directory.write(
            "xsessions/xign-test.desktop", "[Desktop Entry]\nName=xign test\nExec=xign-test\nType=Application\n",
            mode: 0o644)
        _ = try directory.write(
            "etc/sddm.conf",
            """
            [General]
            HaltCommand=/bin/false
            RebootCommand=/bin/false
            InputMethod=
            [Users]
            MinimumUid=\(uid)
            MaximumUid=\(uid)
            [X11]
            ServerPath=\(sandbox.xserver)
            DisplayCommand=/bin/true
            DisplayStopCommand=/bin/true
            SessionDir=\(directory.file("xsessions"))
            SessionCommand=\(session)
            [Wayland]
            SessionDir=\(directory.file("wayland-sessions"))

            """, mode: 0o644)

        try sandbox.run(
            "/usr/bin/script -qec /usr/bin/sddm /dev/null",
            mounts: [
                "mount -t overlay overlay -o lowerdir=/etc,upperdir=\(directory.file("etc")),workdir=\(directory.file("work")) /etc",
                "mount --bind \(directory.file("log")) /var/log",
                "mount -t tmpfs -o mode=0750,uid=$(id -u sddm),gid=$(id -g sddm) tmpfs /var/lib/sddm",
            ])
        guard try waitUntil(seconds: 30, { self.log.contains("Message received from greeter: Connect") }) else {
            throw TestFailure("SDDM's greeter did not start: \(log.suffix(2000))")
        }
    }

    /// SDDM's log: each PAM message it received, and each authentication's end.
    public var log: String { (try? String(contentsOfFile: directory.file("log/sddm.log"), encoding: .utf8)) ?? "" }

    /// Whether the user's session started.
    public var sessionStarted: Bool { FileManager.default.fileExists(atPath: home + "/session-started") }

    /// How many logins SDDM saw refused ("Login failed" at the greeter): its helper exits with HELPER_AUTH_ERROR.
    public var failedLogins: Int { log.components(separatedBy: "Auth: sddm-helper exited with 1\n").count - 1 }

    /// The X display SDDM started, with the cookie that opens it (its name is in the cookie file).
    private func input() throws -> XDisplayInput {
        guard let line = log.split(separator: "\n").first(where: { $0.contains("Adding cookie to \"") }),
            let cookie = line.split(separator: "\"").dropFirst().first.map(String.init)
        else { throw TestFailure("SDDM started no X server: \(log.suffix(1000))") }
        let list = try ChildProcess("/usr/bin/xauth", ["-f", cookie, "list"], in: directory).wait(timeout: 10)
        // SDDM adds the cookie again once the X server has picked its display: the last entry names it.
        guard let entry = list.stdout.split(separator: "\n").last?.split(separator: " ").first,
            let colon = entry.lastIndex(of: ":")
        else {
            throw TestFailure("no display in \(cookie): \(list.stderr)")
        }
        return XDisplayInput(
            environment: ["DISPLAY": String(entry[colon...]), "XAUTHORITY": cookie], directory: directory)
    }

    /// Types `text` and Return into the greeter's focused field (the password of the one user it lists).
    public func type(_ text: String) throws { try input().type(text) }

    public func picture(to path: String) throws { try input().picture(to: path) }

    /// Waits until the greeter shows that a login failed. Its theme empties the password field in the same step, so
    /// keys typed before it shows are lost: type the next PIN only after this.
    public func waitForFailureShown() throws -> Bool {
        try waitUntil(seconds: 60) { try self.input().text().contains("Login failed") }
    }
}
