import FoundationEssentials

/// Where logind put a process, read from `/proc/PID/cgroup` by systemd's own rule: after the slices the first unit
/// decides, and logind's units have fixed places, `user.slice/user-UID.slice/session-ID.scope` for a session and
/// `user.slice/user-UID.slice/user@UID.service/…` for a user's service manager. A user may make cgroups below their
/// own service manager (a `session-c1.scope` inside `user@UID.service/app.slice`), and systemd reads those as the
/// service manager's; so do we. Anything else is in no session.
enum SystemdPlacement: Equatable {
    case session(id: String, uid: UInt32)
    case userManager(uid: UInt32)

    /// From the file's lines `0::PATH` (cgroup v2) and `N:name=systemd:PATH` (the hierarchy systemd tracks processes in
    /// on v1 and hybrid machines). Where both place the process, they must agree; a v2 path of `/` beside the named
    /// hierarchy is a v2 tree nobody uses.
    init?(cgroupFile data: Data) {
        var named: Substring?
        var unified: Substring?
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3 else { continue }
            if fields[0] == "0" && fields[1].isEmpty { unified = fields[2] }
            if fields[1].split(separator: ",").contains("name=systemd") { named = fields[2] }
        }
        let paths = [named, unified.flatMap { named != nil && $0 == "/" ? nil : $0 }].compactMap { $0 }
        let placements = paths.map(Self.init(path:))
        guard let first = placements.first, let placement = first, placements.allSatisfy({ $0 == placement }) else {
            return nil
        }
        self = placement
    }

    init?(path: Substring) {
        let parts = path.split(separator: "/")
        guard parts.count >= 3, parts[0] == "user.slice",
            let uid = Self.uid(parts[1], between: "user-", and: ".slice")
        else { return nil }
        let unit = parts[2]
        if parts.count == 3, unit.hasPrefix("session-"), unit.hasSuffix(".scope") {
            let id = unit.dropFirst("session-".count).dropLast(".scope".count)
            guard LoginOrigin.isIdentifier(id) else { return nil }
            self = .session(id: String(id), uid: uid)
        } else if Self.uid(unit, between: "user@", and: ".service") == uid {
            self = .userManager(uid: uid)
        } else {
            return nil
        }
    }

    private static func uid(_ name: Substring, between prefix: String, and suffix: String) -> UInt32? {
        guard name.hasPrefix(prefix), name.hasSuffix(suffix), name.count > prefix.count + suffix.count else {
            return nil
        }
        let digits = name.dropFirst(prefix.count).dropLast(suffix.count)
        guard digits.count <= 10, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return UInt32(digits)
    }
}
