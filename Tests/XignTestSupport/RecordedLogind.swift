import Foundation

/// logind for machines that run none (these): the state files logind writes (`sessions/ID`, `users/UID`), recorded
/// in a directory of the test's, and real cgroups named as logind names its scopes, to run a process in. The module
/// reads the process's cgroup as it does under logind; the records are a model of what logind would say.
public final class RecordedLogind: @unchecked Sendable {
    public let directory = TemporaryDirectory()
    /// What `pam.logind_sessions` in xign.conf names.
    public var sessionsDirectory: String { directory.file("sessions") }
    /// The hierarchy's root: the cgroups are made where systemd makes them (no systemd runs here), with names of this
    /// run's own, so that tests side by side share only the slices.
    private let base: String
    /// In every name this run makes, so that `Tests/leftovers.sh` finds what a run left behind.
    private let tag = "xign" + UUID().uuidString.lowercased().filter { $0.isLetter || $0.isNumber }.prefix(6)
    /// The session ids the tests name, and the ids they have here, with their users' uids.
    private var sessions: [String: (id: String, uid: uid_t)] = [:]
    private var groups: [String] = []

    public init() throws {
        // The named v1 hierarchy systemd used where it exists, else cgroup v2.
        let base = ["/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"].first {
            FileManager.default.fileExists(atPath: $0 + "/cgroup.procs")
        }
        guard let base else { throw TestFailure("no writable cgroup hierarchy to model logind's scopes in") }
        self.base = base
        for name in ["sessions", "users"] {
            try FileManager.default.createDirectory(atPath: directory.file(name), withIntermediateDirectories: true)
        }
    }

    /// The id of the session the test calls `name`, as logind names its scope.
    public func sessionId(_ name: String) -> String { sessions[name]?.id ?? name }

    /// Whether a session the test calls `name` is recorded.
    public func records(_ name: String) -> Bool { sessions[name] != nil }

    /// A session as logind records it: on `seat` (nil for none: ssh, cron), active or not, from `remoteHost`.
    public func addSession(
        _ name: String, user: String, seat: String? = "seat0", active: Bool = true, remoteHost: String? = nil
    ) throws {
        let uid = try Self.uid(of: user)
        let id = name + tag
        sessions[name] = (id, uid)
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
        var listed =
            (try? String(contentsOfFile: userFile, encoding: .utf8))?.split(separator: "\n")
            .first { $0.hasPrefix("SESSIONS=") }.map {
                $0.dropFirst("SESSIONS=".count).split(separator: " ").map(String.init)
            } ?? []
        listed.append(id)
        let display = listed.last {
            ((try? String(contentsOfFile: directory.file("sessions/\($0)"), encoding: .utf8)) ?? "").contains("SEAT=")
        }
        try (["NAME=\(user)", "SESSIONS=\(listed.joined(separator: " "))"] + (display.map { ["DISPLAY=\($0)"] } ?? []))
            .joined(separator: "\n")
            .write(toFile: userFile, atomically: true, encoding: .utf8)
    }

    /// The prefix that runs a command in session `name`'s scope, where logind puts a session's processes:
    /// `user.slice/user-UID.slice/session-ID.scope`.
    public func inSession(_ name: String) throws -> [String] {
        guard let session = sessions[name] else { throw TestFailure("no recorded session \(name)") }
        return try inGroup("user.slice/user-\(session.uid).slice/session-\(session.id).scope")
    }

    /// The prefix that runs a command in `user`'s service manager (`user@UID.service`), where a desktop's terminals
    /// and `systemd-run --user` put their processes.
    public func inUserManager(_ user: String) throws -> [String] {
        let uid = try Self.uid(of: user)
        return try inGroup("user.slice/user-\(uid).slice/user@\(uid).service/app.slice/app-\(tag).scope")
    }

    /// The prefix that runs a command in `path` below `user`'s service manager, which systemd delegates to the user:
    /// any cgroup the user chooses to make there.
    public func belowUserManager(_ user: String, _ path: String) throws -> [String] {
        let uid = try Self.uid(of: user)
        return try inGroup("user.slice/user-\(uid).slice/user@\(uid).service/\(path)")
    }

    /// The prefix that runs a command in a system service's cgroup (cron.service), in no session.
    public func inService(_ name: String) throws -> [String] {
        try inGroup("system.slice/\(tag).slice/\(name)")
    }

    private func inGroup(_ path: String) throws -> [String] {
        let group = "\(base)/\(path)"
        try FileManager.default.createDirectory(atPath: group, withIntermediateDirectories: true)
        if !groups.contains(group) { groups.append(group) }
        return ["/bin/sh", "-c", "echo $$ > '\(group)/cgroup.procs' && exec \"$0\" \"$@\""]
    }

    private static func uid(of user: String) throws -> uid_t {
        guard let account = getpwnam(user) else { throw TestFailure("no user \(user)") }
        return account.pointee.pw_uid
    }

    deinit {
        // Deepest first. A process still in a group (one a test did not wait for) moves to the root, so that the group
        // goes; a slice another test still uses stays for that test to remove (rmdir refuses it).
        var all = Set<String>()
        for group in groups {
            var path = group
            while path.count > base.count {
                all.insert(path)
                path = (path as NSString).deletingLastPathComponent
            }
        }
        for group in all.sorted(by: { $0.count > $1.count }) {
            if groups.contains(group) { empty(group) } else { rmdir(group) }
        }
    }

    /// Removes a scope of this run's. A process that is exiting (a locker's helper, not yet reaped) keeps the group
    /// busy for a moment after its parent returned, so this tries for a few seconds, not once.
    private func empty(_ group: String) {
        for _ in 0..<100 {
            let procs = (try? String(contentsOfFile: group + "/cgroup.procs", encoding: .utf8)) ?? ""
            for pid in procs.split(separator: "\n") {
                try? "\(pid)\n".write(toFile: base + "/cgroup.procs", atomically: false, encoding: .utf8)
            }
            if rmdir(group) == 0 || errno != EBUSY { return }
            usleep(50_000)
        }
    }
}
