import Foundation
import XignCore
import XignHarness

#if canImport(Glibc)
import Glibc
#endif

/// The memory a login costs inside a real sshd: each connection's sshd processes (the privileged monitor, which
/// runs PAM, and the session process it forks) with pam_xign in confirm mode against pam_permit, measured while the
/// session runs.
extension Bench {
    /// One process's share of memory, in KiB, from smaps_rollup. The dirty pages of the module (its relocations) and
    /// of the heap are shared copy-on-write between the monitor and the session process it forked, so they show in
    /// PSS dirty (split between the two), not in private dirty.
    struct ProcessMemory {
        var pss = 0, pssDirty = 0, privateDirty = 0

        static func + (left: Self, right: Self) -> Self {
            Self(
                pss: left.pss + right.pss, pssDirty: left.pssDirty + right.pssDirty,
                privateDirty: left.privateDirty + right.privateDirty)
        }
    }

    struct ConnectionMemory {
        var monitor: ProcessMemory, session: ProcessMemory
        var connection: ProcessMemory { monitor + session }
    }

    static func sshMemoryFigures(
        module: String, work: String, hostState: String, manager: String, managerData: String, email: String,
        approve: (String, String) throws -> Void
    ) throws {
        let wrapper = try libraryDirectory() + "/libpam_wrapper.so"
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/sbin/sshd"),
            FileManager.default.fileExists(atPath: wrapper)
        else {
            return print("\n(sshd memory needs root, openssh-server and libpam-wrapper: not measured)")
        }
        let user = try SSHServer.user.get()
        try run(manager, ["admin", "accounts", "set-login", email, user, "--data-dir", managerData])
        try run(manager, ["admin", "accounts", "set-local-user", email, "yes", "--data-dir", managerData])
        try "state_dir = \(hostState)\n".write(toFile: work + "/sshd-xign.conf", atomically: true, encoding: .utf8)
        let stacks = [
            ("pam_permit", "auth required pam_permit.so"),
            ("pam_xign", "auth required \(module) mode=confirm config=\(work)/sshd-xign.conf timeout=30"),
        ]
        let connections = 7
        var measured: [String: [ConnectionMemory]] = [:]
        for (name, auth) in stacks {
            let services = work + "/sshd-" + name
            try FileManager.default.createDirectory(atPath: services, withIntermediateDirectories: true)
            try (auth + "\naccount required pam_permit.so\nsession required pam_permit.so\n").write(
                toFile: services + "/sshd", atomically: true, encoding: .utf8)
            let server = try SSHServer(pamServices: services)
            for _ in 0..<connections {
                let ssh = try server.ssh(user, "echo session-open; read line")
                if name == "pam_xign" {
                    let text = try ssh.expect("Press Enter once approved:")
                    guard let shown = confirmationShown(in: text) else {
                        throw TestFailure("no confirmation over ssh: \(text.suffix(300))")
                    }
                    try approve(shown.id, shown.code)
                    ssh.send("\r")
                }
                try ssh.expect("session-open")
                measured[name, default: []].append(try connectionMemory(listener: server.pid))
                ssh.send("\r")
                guard try ssh.wait() == 0 else {
                    throw TestFailure("the ssh session did not end cleanly: \(ssh.output.suffix(300))")
                }
            }
        }
        func median(_ name: String, _ field: KeyPath<ConnectionMemory, Int>) -> Int {
            let sorted = measured[name]!.map { $0[keyPath: field] }.sorted()
            return sorted[sorted.count / 2]
        }
        print(
            "\nsshd per connection, while the session runs (KiB, median of \(connections) connections each, same run)")
        print(
            "process, figure".padding(toLength: 40, withPad: " ", startingAt: 0) + "pam_permit   pam_xign   difference")
        let rows: [(String, KeyPath<ConnectionMemory, Int>)] = [
            ("monitor [priv] (runs PAM), PSS", \.monitor.pss), ("  of it dirty", \.monitor.pssDirty),
            ("  private dirty", \.monitor.privateDirty),
            ("session process (user@notty), PSS", \.session.pss), ("  of it dirty", \.session.pssDirty),
            ("  private dirty", \.session.privateDirty),
            ("the connection, PSS", \.connection.pss), ("  of it dirty", \.connection.pssDirty),
        ]
        for (label, field) in rows {
            let permit = median("pam_permit", field), xign = median("pam_xign", field)
            print(
                label.padding(toLength: 40, withPad: " ", startingAt: 0)
                    + String(format: "%10d %10d %+12d", permit, xign, xign - permit))
        }
        print(
            "(clean pages are the module's code, shared with every other connection through the page cache; dirty ones are this connection's own)"
        )
    }

    /// The memory of the one open session's sshd processes: the monitor is the listener's child, the session process
    /// the monitor's child that runs as the user. A monitor of an earlier connection still ending has no session.
    private static func connectionMemory(listener: pid_t) throws -> ConnectionMemory {
        let open = children(of: listener).compactMap { monitor in
            children(of: monitor).first { processName($0) == "sshd" }.map { (monitor: monitor, session: $0) }
        }
        guard open.count == 1, let (monitor, session) = open.first else {
            throw TestFailure("expected one open sshd session, found \(open)")
        }
        return ConnectionMemory(monitor: try memory(of: monitor), session: try memory(of: session))
    }

    private static func children(of parent: pid_t) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { Int32($0) }.filter { pid in
            // The fields after the parenthesised name: state, then the parent's pid.
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let end = stat.range(of: ") ", options: .backwards)
            else { return false }
            return stat[end.upperBound...].split(separator: " ").dropFirst().first.flatMap { Int32($0) } == parent
        }
    }

    private static func processName(_ pid: pid_t) -> String {
        ((try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)) ?? "").trimmingCharacters(
            in: .whitespacesAndNewlines)
    }

    private static func memory(of pid: pid_t) throws -> ProcessMemory {
        let rollup = try String(contentsOfFile: "/proc/\(pid)/smaps_rollup", encoding: .utf8)
        func field(_ name: String) throws -> Int {
            guard let line = rollup.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }),
                let kibibytes = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) })
            else { throw TestFailure("no \(name) in /proc/\(pid)/smaps_rollup") }
            return kibibytes
        }
        return ProcessMemory(
            pss: try field("Pss"), pssDirty: try field("Pss_Dirty"), privateDirty: try field("Private_Dirty"))
    }
}
