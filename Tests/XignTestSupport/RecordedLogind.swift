import Foundation

/// logind for machines that run none (these): the state files logind writes (`sessions/ID`, `users/UID`), recorded
/// in a directory of the test's, and real cgroups named as logind names its scopes, to run a process in. The module
/// reads the process's cgroup as it does under logind; the records are a model of what logind would say.
public final class RecordedLogind: @unchecked Sendable {
    public let directory = TemporaryDirectory()
    /// What `pam.logind_sessions` in xign.conf names.
    public var sessionsDirectory: String { directory.file("sessions") }
    private var groups: [String] = []
    private let root: String

    public init() throws {
        // The named v1 hierarchy systemd used where it exists, else cgroup v2.
        let base = ["/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"].first {
            FileManager.default.fileExists(atPath: $0 + "/cgroup.procs")
        }
        guard let base else { throw TestFailure("no writable cgroup hierarchy to model logind's scopes in") }
        root = "\(base)/xign-test-\(getpid())-\(UUID().uuidString.prefix(8))"
        for name in ["sessions", "users"] {
            try FileManager.default.createDirectory(atPath: directory.file(name), withIntermediateDirectories: true)
        }
    }

    /// A session as logind records it: on `seat` (nil for none: ssh, cron), active or not, from `remoteHost`.
    public func addSession(
        _ id: String, user: String, seat: String? = "seat0", active: Bool = true, remoteHost: String? = nil
    ) throws {
        guard let account = getpwnam(user) else { throw TestFailure("no user \(user)") }
        let uid = account.pointee.pw_uid
        var lines = [
            "UID=\(uid)", "USER=\(user)", "ACTIVE=\(active ? 1 : 0)", "REMOTE=\(remoteHost == nil ? 0 : 1)",
            "CLASS=user",
        ]
        if let seat { lines.append("SEAT=\(seat)") }
        if let remoteHost { lines.append("REMOTE_HOST=\(remoteHost)") }
        try lines.joined(separator: "\n").write(
            toFile: directory.file("sessions/\(id)"), atomically: true, encoding: .utf8)
        // The user's record lists every session; the newest seat session is the display.
        let userFile = directory.file("users/\(uid)")
        var sessions =
            (try? String(contentsOfFile: userFile, encoding: .utf8))?.split(separator: "\n")
            .first { $0.hasPrefix("SESSIONS=") }.map {
                $0.dropFirst("SESSIONS=".count).split(separator: " ").map(String.init)
            } ?? []
        sessions.append(id)
        let display = sessions.last {
            ((try? String(contentsOfFile: directory.file("sessions/\($0)"), encoding: .utf8)) ?? "").contains("SEAT=")
        }
        try
            (["NAME=\(user)", "SESSIONS=\(sessions.joined(separator: " "))"] + (display.map { ["DISPLAY=\($0)"] } ?? []))
            .joined(separator: "\n")
            .write(toFile: userFile, atomically: true, encoding: .utf8)
    }

    /// The prefix that runs a command in session `id`'s scope, as logind puts a session's processes.
    public func inSession(_ id: String) throws -> [String] { try inGroup("user.slice/session-\(id).scope") }

    /// The prefix that runs a command in `user`'s service manager (`user@UID.service`), where a desktop's terminals
    /// and `systemd-run --user` put their processes.
    public func inUserManager(_ user: String) throws -> [String] {
        guard let account = getpwnam(user) else { throw TestFailure("no user \(user)") }
        return try inGroup("user.slice/user@\(account.pointee.pw_uid).service/app.slice")
    }

    /// The prefix that runs a command in a system service's cgroup (cron.service), in no session.
    public func inService(_ name: String) throws -> [String] { try inGroup("system.slice/\(name)") }

    private func inGroup(_ path: String) throws -> [String] {
        let group = "\(root)/\(path)"
        try FileManager.default.createDirectory(atPath: group, withIntermediateDirectories: true)
        if !groups.contains(group) { groups.append(group) }
        return ["/bin/sh", "-c", "echo $$ > '\(group)/cgroup.procs' && exec \"$0\" \"$@\""]
    }

    deinit {
        // Deepest first; a group whose processes have not all ended yet stays (rmdir refuses it).
        var all = Set<String>()
        for group in groups {
            var path = group
            while path.count > root.count {
                all.insert(path)
                path = (path as NSString).deletingLastPathComponent
            }
        }
        for group in all.sorted(by: { $0.count > $1.count }) { rmdir(group) }
        rmdir(root)
    }
}
