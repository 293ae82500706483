import Foundation
import XignCore
import XignProtocol

/// A host joined to a manager, as its own machine: xignd runs in a private mount namespace where /var/lib is an
/// overlay (so /var/lib/xign-nss is this host's), the built libnss_xign.so.2 lies among the system's libraries, and
/// /etc/nsswitch.conf says `files xign`. Lookups run in that namespace through glibc's own NSS (getent, id), as
/// sshd's and sudo's would; the machine's files are not touched.
public final class JoinedHost: @unchecked Sendable {
    public let name: String
    public let directory = TemporaryDirectory()
    private(set) var holder: ChildProcess?
    public var cacheDirectory: String { directory.file("var/xign-nss") }
    public var xigndPID: pid_t? {
        (try? String(contentsOfFile: directory.file("xignd.pid"), encoding: .utf8)).flatMap {
            pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }

    public static var module: String {
        get throws {
            let path = Repository.path + "/.build-nss/libnss_xign.so.2"
            guard FileManager.default.fileExists(atPath: path) else {
                throw TestFailure("\(path) is not built; run `make nss` (make test does)")
            }
            return path
        }
    }

    /// This host's xign.conf (its state, a software host key), for xignd and pam_xign.
    public var configPath: String { directory.file("xign.conf") }

    /// Joins `manager` as `name` in `groups` and starts xignd. `localUsers`: lines added to this host's /etc/passwd;
    /// `mounts`: more shell lines that shape the namespace (each must succeed), such as a pam.d file bound in place;
    /// `sources`: NSS sources nsswitch.conf lists between files and xign (`extrausers`), with `varLib` files placed
    /// under this host's /var/lib; `config`: more lines of its xign.conf.
    public init(
        _ name: String, groups: [String], manager: ManagerProcess, localUsers: [String] = [], refreshSeconds: Int = 5,
        mounts extraMounts: [String] = [], sources: [String] = [], varLib: [String: String] = [:],
        config more: String = ""
    ) throws {
        self.name = name
        let added = try manager.admin(["hosts", "add", name] + groups.flatMap { ["--group", $0] })
        guard added.status == 0 else { throw TestFailure("hosts add \(name): \(added.stderr)") }
        var configuration = ClientConfiguration()
        configuration.stateDirectory = directory.file("state")
        configuration.deviceKey = .software
        _ = try XignSdk(configuration: configuration, localUser: "root").joinHost(
            managerURL: manager.url,
            token: try HostJoinToken(parsing: String(added.stdout.split(separator: " ").last ?? "")))
        let config = try directory.write(
            "xign.conf", "state_dir = \(configuration.stateDirectory)\ndevice_key = software\n" + more)
        for sub in ["var", "var-work", "lib", "lib-work"] {
            try FileManager.default.createDirectory(atPath: directory.file(sub), withIntermediateDirectories: false)
        }
        for (path, contents) in varLib {
            let file = directory.file("var/" + path)
            try FileManager.default.createDirectory(
                atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try writeTestFile(file, Data(contents.utf8), mode: 0o644)
        }
        let lookups = (["files"] + sources + ["xign"]).joined(separator: " ")
        try FileManager.default.copyItem(atPath: try Self.module, toPath: directory.file("lib/libnss_xign.so.2"))
        _ = try directory.write(
            "nsswitch.conf", "passwd: \(lookups)\ngroup: \(lookups)\nshadow: files\nhosts: files\n", mode: 0o644)
        var mounts = [
            "mount -t overlay overlay -o lowerdir=/var/lib,upperdir=\(directory.file("var")),workdir=\(directory.file("var-work")) /var/lib",
            "mount -t overlay overlay -o lowerdir=/usr/lib/x86_64-linux-gnu,upperdir=\(directory.file("lib")),workdir=\(directory.file("lib-work")) /usr/lib/x86_64-linux-gnu",
            "mount --bind \(directory.file("nsswitch.conf")) /etc/nsswitch.conf",
        ]
        mounts += extraMounts
        if !localUsers.isEmpty {
            let passwd = try String(contentsOfFile: "/etc/passwd", encoding: .utf8)
            _ = try directory.write("passwd", passwd + localUsers.map { $0 + "\n" }.joined(), mode: 0o644)
            mounts.append("mount --bind \(directory.file("passwd")) /etc/passwd")
        }
        let xignd = [
            try Products.path("xignd"), "--config", config, "--socket", directory.file("xignd.sock"),
            "--directory", "/var/lib/xign-nss", "--directory-refresh", String(refreshSeconds),
        ].joined(separator: " ")
        let script =
            mounts.map { $0 + " || exit 1" }.joined(separator: "\n") + """

                \(xignd) 2> \(directory.file("xignd.log")) &
                echo $! > \(directory.file("xignd.pid"))
                trap 'kill -9 $(cat \(directory.file("xignd.pid"))) 2>/dev/null; exit 0' TERM
                while :; do sleep 0.2; done
                """
        holder = try ChildProcess(
            "/usr/bin/unshare", ["--mount", "--propagation", "private", "/bin/sh", "-c", script], in: directory)
        let serving = try waitUntil(seconds: 20) {
            if let ended = holder?.poll() { throw TestFailure("host \(name) ended: \(ended.stderr) \(log)") }
            return FileManager.default.fileExists(atPath: cacheDirectory + "/socket")
        }
        guard serving else { throw TestFailure("xignd on \(name) did not serve its directory: \(log)") }
    }

    public var log: String { (try? String(contentsOfFile: directory.file("xignd.log"), encoding: .utf8)) ?? "" }

    /// What runs a program in this host's mount namespace: put it before the program's path and arguments.
    public var launcher: [String] {
        get throws {
            guard let holder else { throw TestFailure("host \(name) is stopped") }
            return ["/usr/bin/nsenter", "-t", String(holder.pid), "-m", "--"]
        }
    }

    /// Runs `arguments` in this host's mount namespace.
    public func run(_ arguments: [String]) throws -> ChildProcess.Result {
        let command = try launcher + arguments
        return try ChildProcess(command[0], Array(command.dropFirst()), in: directory).wait(timeout: 30)
    }

    /// `getent passwd KEY` (or another database) on this host: the line, or nil when it is not found.
    public func getent(_ database: String, _ key: String) throws -> String? {
        let result = try run(["/usr/bin/getent", database, key])
        return result.status == 0 ? result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) : nil
    }

    /// Waits until `getent passwd name` on this host says `present`.
    public func waitForUser(_ name: String, present: Bool, seconds: Double = 30) throws -> Bool {
        try waitUntil(seconds: seconds, every: 200_000) { (try getent("passwd", name) != nil) == present }
    }

    /// Kills xignd (`signal`), leaving the namespace and its cache.
    public func signalDaemon(_ signal: Int32) {
        if let pid = xigndPID { kill(pid, signal) }
    }

    public func stop() {
        if let pid = xigndPID { kill(pid, SIGKILL) }
        if let holder {
            kill(holder.pid, SIGTERM)
            _ = try? holder.wait(timeout: 10)
        }
        holder = nil
    }

    deinit { stop() }
}

/// The repository's root, where `make` leaves what it builds.
public enum Repository {
    public static let path: String = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.path + "/Package.swift") { return url.path }
        }
        return FileManager.default.currentDirectoryPath
    }()
}
