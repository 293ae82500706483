import Foundation
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// libnss_xign's cost, in a mount namespace whose /var/lib/xign-nss holds a cache of 1,000 directory users and whose
/// nsswitch.conf says `files xign`: `getent passwd` of a cached user (the last line, the longest scan) and of a
/// local user, against `files` alone in the same namespace, same run. Then getpwnam in one process, per call.
extension Bench {
    static let directoryUsers = 1_000

    static func directoryFigures(module: String, lookupSource: String, work: String) throws {
        let directory = work + "/nss"
        for sub in ["var/xign-nss", "var-work", "lib", "lib-work"] {
            try FileManager.default.createDirectory(atPath: directory + "/" + sub, withIntermediateDirectories: true)
        }
        try FileManager.default.copyItem(atPath: module, toPath: directory + "/lib/libnss_xign.so.2")
        let first = UnixIdRange.standard.lowerBound
        let users = (0..<directoryUsers).map { String(format: "user%04d", $0) }
        for (name, lines) in [
            (
                DirectoryFiles.passwd,
                users.enumerated().map { "\($1):*:\(first + Int64($0)):\(first + Int64($0))::/home/\($1):/bin/bash\n" }
            ),
            (DirectoryFiles.group, users.enumerated().map { "\($1):*:\(first + Int64($0)):\n" }),
            (DirectoryFiles.memberships, []),
        ] {
            let path = directory + "/var/xign-nss/" + name
            try lines.joined().write(toFile: path, atomically: true, encoding: .utf8)
            chmod(path, 0o644)
        }
        try "passwd: files xign\ngroup: files xign\n".write(
            toFile: directory + "/xign.conf", atomically: true, encoding: .utf8)
        try "passwd: files\ngroup: files\n".write(toFile: directory + "/files.conf", atomically: true, encoding: .utf8)
        _ = try run("/usr/bin/cc", ["-O2", "-o", directory + "/nss_lookup", lookupSource])

        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        holder.arguments = [
            "--mount", "--propagation", "private", "/bin/sh", "-c",
            """
            mount -t overlay overlay -o lowerdir=/var/lib,upperdir=\(directory)/var,workdir=\(directory)/var-work /var/lib &&
            mount -t overlay overlay -o lowerdir=/usr/lib/x86_64-linux-gnu,upperdir=\(directory)/lib,workdir=\(directory)/lib-work /usr/lib/x86_64-linux-gnu &&
            mount --bind \(directory)/xign.conf /etc/nsswitch.conf && touch \(directory)/ready && exec sleep 3600
            """,
        ]
        try holder.run()
        defer { kill(holder.processIdentifier, SIGKILL) }
        for _ in 0..<250 where !FileManager.default.fileExists(atPath: directory + "/ready") { usleep(20_000) }
        let inside = ["-t", String(holder.processIdentifier), "-m", "--"]
        /// `getent passwd name`, runs times, spawned inside the namespace; each run's time.
        func getent(_ label: String, _ name: String, runs: Int = 200) throws -> Figure {
            let lines = try run(
                "/usr/bin/nsenter", inside + [directory + "/nss_lookup", "--getent", name, String(runs)])
            return Figure(
                name: label, milliseconds: lines.split(separator: "\n").compactMap { Double($0) }.map { $0 / 1000 })
        }
        func perCall(_ name: String) throws -> String {
            try run("/usr/bin/nsenter", inside + [directory + "/nss_lookup", name, "2000"])
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let cachedUser = users.last!
        _ = try getent("warm-up", cachedUser, runs: 20)
        let cached = try getent("getent passwd \(cachedUser) (cache, files xign)", cachedUser)
        let local = try getent("getent passwd root (local, files xign)", "root")
        let (cachedCall, localCall) = (try perCall(cachedUser), try perCall("root"))
        _ = try run(
            "/usr/bin/nsenter", inside + ["/bin/mount", "--bind", directory + "/files.conf", "/etc/nsswitch.conf"])
        let files = try getent("getent passwd root (files alone: the floor)", "root")
        let filesCall = try perCall("root")
        table(
            "libnss_xign: a process that looks up one user (getent), \(directoryUsers) users in the cache",
            [files, local, cached], floor: files)
        print(
            "getpwnam in one process, per call: \(cachedCall) ns for \(cachedUser) from the cache, \(localCall) ns for root through files xign, \(filesCall) ns for root with files alone"
        )
    }
}
