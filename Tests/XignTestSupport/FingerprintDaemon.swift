import Foundation
import XignDevice

#if canImport(Glibc)
import Glibc
#endif

/// The real fprintd with libfprint's virtual reader, on a private system bus with a polkit stand-in
/// (python-dbusmock's polkitd template) that allows fprintd's actions. Only the finger is simulated:
/// `scan(_:)` puts one on the reader.
public final class FingerprintDaemon: @unchecked Sendable {
    public let directory = TemporaryDirectory()
    private var processes: [ChildProcess] = []
    public var busAddress: String { "unix:path=\(directory.file("bus"))" }
    var readerSocket: String { directory.file("reader") }
    /// fprintd's state directory: `<user>/<driver>/<device>/<finger>`, as in /var/lib/fprint.
    public var printsDirectory: String { directory.file("prints") }

    /// The reader as the client is configured for this daemon.
    public func reader(timeoutMilliseconds: Int = 5_000) -> FingerprintReader {
        FingerprintReader(
            busAddress: busAddress, timeoutMilliseconds: timeoutMilliseconds, printsDirectory: printsDirectory)
    }
    var environment: [String: String] { ["PATH": "/usr/bin:/bin", "DBUS_SYSTEM_BUS_ADDRESS": busAddress] }

    public init() throws {
        let config = try directory.write(
            "bus.conf",
            """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>system</type>
              <listen>\(busAddress)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow user="*"/>
                <allow own="*"/>
                <allow send_destination="*"/>
                <allow receive_sender="*"/>
              </policy>
            </busconfig>
            """, mode: 0o644)
        processes.append(
            try ChildProcess(
                "/usr/bin/dbus-daemon", ["--config-file=\(config)", "--nofork"], environment: environment, in: directory
            ))
        try wait("the bus") { FileManager.default.fileExists(atPath: self.directory.file("bus")) }
        processes.append(
            try ChildProcess(
                "/usr/bin/python3", ["-m", "dbusmock", "--system", "--template", "polkitd"], environment: environment,
                in: directory))
        try wait("polkit") { try self.hasOwner("org.freedesktop.PolicyKit1") }
        let allowed = ["enroll", "verify", "setusername"].map { "net.reactivated.fprint.device.\($0)" }.joined(
            separator: "\",\"")
        _ = try run([
            "/usr/bin/gdbus", "call", "--system", "--dest", "org.freedesktop.PolicyKit1", "--object-path",
            "/org/freedesktop/PolicyKit1/Authority",
            "--method", "org.freedesktop.DBus.Mock.SetAllowed", "[\"\(allowed)\"]",
        ])
        try FileManager.default.createDirectory(atPath: directory.file("prints"), withIntermediateDirectories: true)
        var daemonEnvironment = environment
        daemonEnvironment["FP_VIRTUAL_DEVICE"] = readerSocket
        daemonEnvironment["STATE_DIRECTORY"] = directory.file("prints")
        // -t: no idle exit, so the daemon outlives quiet stretches of a test.
        processes.append(
            try ChildProcess("/usr/libexec/fprintd", ["-t"], environment: daemonEnvironment, in: directory))
        try wait("fprintd") { try self.hasOwner("net.reactivated.Fprint") }
    }

    deinit { for process in processes.reversed() { process.stop() } }

    /// Enrols `finger` as `user`'s `slot` (fprintd's finger name) with fprintd-enroll, the tool users have.
    public func enrol(user: String, finger: String, as slot: String = "right-index-finger") throws {
        let enroll = try ChildProcess(
            "/usr/bin/fprintd-enroll", ["-f", slot, user], environment: environment, in: directory)
        // The reader listens once fprintd opens it for the enrolment; it takes five touches.
        for _ in 0..<5 {
            try scan(finger)
            usleep(200_000)
        }
        let result = try enroll.wait(timeout: 20)
        guard result.status == 0, result.stdout.contains("enroll-completed") else {
            throw TestFailure("fprintd-enroll failed: \(result.stdout) \(result.stderr)")
        }
    }

    /// Deletes every finger of `user` with fprintd-delete.
    public func deleteFingers(of user: String) throws {
        let result = try run(["/usr/bin/fprintd-delete", user])
        guard result.status == 0 else { throw TestFailure("fprintd-delete failed: \(result.stdout) \(result.stderr)") }
    }

    /// Puts `finger` on the reader, waiting until fprintd has opened it (a claim opens it).
    public func scan(_ finger: String) throws {
        try wait("the reader to open") { self.send("SCAN \(finger)") }
    }

    /// Puts `finger` on the reader from another thread, as a user would while a login waits.
    public func scanLater(_ finger: String) {
        Thread { try? self.scan(finger) }.start()
    }

    /// What any local user can do on a system bus: send a VerifyStatus signal straight to every other connection
    /// (unicast, so no match rule filters it), as `user`. Returns how many connections the bus accepted it for.
    public func forgeVerifyStatus(_ result: String, asUser user: String) throws -> Int {
        guard chmod(directory.path, 0o711) == 0 else { throw TestFailure("cannot open \(directory.path) to \(user)") }
        let device =
            try run([
                "/usr/bin/dbus-send", "--system", "--print-reply", "--dest=net.reactivated.Fprint",
                "/net/reactivated/Fprint/Manager",
                "net.reactivated.Fprint.Manager.GetDefaultDevice",
            ]).stdout.split(separator: "\"").dropFirst().first.map(String.init) ?? ""
        let owner =
            try run([
                "/usr/bin/dbus-send", "--system", "--print-reply", "--dest=org.freedesktop.DBus",
                "/org/freedesktop/DBus",
                "org.freedesktop.DBus.GetNameOwner", "string:net.reactivated.Fprint",
            ]).stdout.split(separator: "\"").dropFirst().first.map(String.init) ?? ""
        let names = try run([
            "/usr/bin/dbus-send", "--system", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
            "org.freedesktop.DBus.ListNames",
        ]).stdout.split(separator: "\"").filter { $0.hasPrefix(":") && String($0) != owner }
        var sent = 0
        for name in names {
            let forged = try run(
                [
                    "/usr/bin/setpriv", "--reuid=\(user)", "--regid=\(user == "nobody" ? "nogroup" : user)",
                    "--clear-groups", "--",
                ] + [
                    "/usr/bin/dbus-send", "--system", "--type=signal", "--dest=\(name)", device,
                    "net.reactivated.Fprint.Device.VerifyStatus",
                    "string:\(result)", "boolean:true",
                ])
            if forged.status == 0 { sent += 1 }
        }
        return sent
    }

    private func send(_ command: String) -> Bool {
        let socket = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return false }
        defer { close(socket) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(readerSocket.utf8.prefix(raw.count - 1))
            raw.copyBytes(from: bytes + [0])
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socket, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else { return false }
        return command.withCString { write(socket, $0, strlen($0)) } == command.utf8.count
    }

    private func hasOwner(_ name: String) throws -> Bool {
        try run([
            "/usr/bin/dbus-send", "--system", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
            "org.freedesktop.DBus.NameHasOwner", "string:\(name)",
        ]).stdout.contains("boolean true")
    }

    private func run(_ command: [String]) throws -> ChildProcess.Result {
        try ChildProcess(command[0], Array(command.dropFirst()), environment: environment, in: directory).wait(
            timeout: 10)
    }

    private func wait(_ what: String, _ condition: () throws -> Bool) throws {
        guard try waitUntil(seconds: 10, condition) else {
            let logs = processes.map { (try? String(contentsOfFile: $0.stderrPath, encoding: .utf8)) ?? "" }.joined(
                separator: "\n")
            throw TestFailure("\(what) did not come up: \(logs.suffix(2000))")
        }
    }
}
