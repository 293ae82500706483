import FoundationEssentials
import XignCore
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// Whether a login happens at this machine. The device key is the machine's, so it proves presence only for a
/// login at the machine: over SSH it is there whoever connects, and a local login with it would rest on the PIN
/// alone. So local needs positive evidence (docs/security.md, "At the machine"):
/// - the caller's logind session is local and the active session of a seat, and its user has no remote session
///   open, which could drive it (a console tmux attached from SSH);
/// - or, without a session yet, the PAM host is a program at the console: `login` on a virtual terminal, or a
///   display manager's greeter, running as root and not as a user's setuid program.
/// Everything else is remote: sshd, a PAM_RHOST, `systemd-run --user` or a cron job (no seat session), and su or
/// sudo on a machine without logind.
struct LoginOrigin {
    let caller: LoginCaller
    let records: ClientConfiguration.SessionRecords

    /// PAM services of programs that run at the console before a session exists.
    static let consoleServices: Set<String> = [
        "login", "gdm-password", "gdm-fingerprint", "gdm-smartcard", "gdm-switchable-auth", "lightdm", "sddm",
    ]

    /// Why the login counts as remote, for the log; nil for a login at this machine.
    var remoteReason: String? {
        if caller.service == "sshd" { return "the service is sshd" }
        if let rhost = caller.rhost, !rhost.isEmpty, !isThisHostNamedByLocalProgram(rhost) {
            return "it comes from \(rhost.prefix(64))"
        }
        if let session = callerSession { return sessionRefusal(session) }
        if let tty = caller.tty, let host = Self.remoteHost(onTerminal: tty, utmp: records.utmpPath) {
            return "its terminal \(tty.prefix(32)) is logged in from \(host)"
        }
        if isConsoleProgram { return nil }
        return
            "nothing shows it is at this machine: its process is in no local seat session of logind, and it is no login program at the console"
    }

    /// sudo (with pam_rhost) and su set PAM_RHOST to this machine's own name; no remote service is trusted to.
    private func isThisHostNamedByLocalProgram(_ rhost: String) -> Bool {
        guard let service = caller.service, ["sudo", "sudo-i", "su", "su-l"].contains(service) else { return false }
        let name = XignSdk.hostName()
        return rhost == name || rhost.split(separator: ".").first.map(String.init) == name
    }

    /// `login` on a virtual terminal, or a display manager, run by root itself: before the user's session exists,
    /// the service and the terminal are the evidence. Through xignd the caller is a user's program, so never this.
    private var isConsoleProgram: Bool {
        guard caller.process == nil, !caller.inSetuidHost, getuid() == 0, let service = caller.service,
            Self.consoleServices.contains(service)
        else { return false }
        guard service == "login" else { return true }
        return caller.tty.map(Self.isVirtualTerminal) ?? false
    }

    /// tty1 … tty63, with or without /dev/.
    static func isVirtualTerminal(_ tty: String) -> Bool {
        let name = tty.hasPrefix("/dev/") ? tty.dropFirst(5) : Substring(tty)
        guard name.hasPrefix("tty"), let number = Int(name.dropFirst(3)) else { return false }
        return (1...63).contains(number)
    }

    /// The logind session the caller runs in, only where it is the caller's own: its `session-ID.scope`, or, for a
    /// process of its service manager (`user@UID.service`, where a desktop starts its terminals), the user's display
    /// session. For sudo and su the caller is the user who ran them, never the target.
    var callerSession: String? {
        let process = caller.process.map(String.init) ?? "self"
        guard let data = try? AtomicFile.read("\(records.processDirectory)/\(process)/cgroup", limit: 64 * 1024),
            let placement = SystemdPlacement(cgroupFile: data)
        else { return nil }
        let uid = caller.uid ?? getuid()
        switch placement {
        case .session(let id, let owner):
            guard owner == uid, Self.fields(at: "\(records.logindSessionsDirectory)/\(id)")?["UID"] == "\(uid)" else {
                return nil
            }
            return id
        case .userManager(let owner):
            guard owner == uid, let user = Self.fields(at: "\(records.logindUsersDirectory)/\(uid)"),
                let display = user["DISPLAY"], Self.isIdentifier(display)
            else { return nil }
            return String(display)
        }
    }

    /// Why `session` is not at this machine, or nil when it is.
    private func sessionRefusal(_ session: String) -> String? {
        guard let record = Self.fields(at: "\(records.logindSessionsDirectory)/\(session)") else {
            return "logind has no record of its session \(session)"
        }
        if record["REMOTE"] == "1" {
            return
                "it runs in remote session \(session) from \(record["REMOTE_HOST"].map { String($0.prefix(64)) } ?? "another host")"
        }
        guard record["SEAT"].map({ !$0.isEmpty }) == true, record["ACTIVE"] == "1" else {
            return
                "its session \(session) is not the active session of a seat (a background job, or another user's turn at the machine)"
        }
        guard let uid = record["UID"], uid.allSatisfy(\.isNumber),
            let user = Self.fields(at: "\(records.logindUsersDirectory)/\(uid)")
        else { return "logind has no record of the user of session \(session)" }
        for other in (user["SESSIONS"] ?? "").split(separator: " ") where Self.isIdentifier(other) && other != session {
            if let record = Self.fields(at: "\(records.logindSessionsDirectory)/\(other)"), record["REMOTE"] == "1" {
                return
                    "its user is also logged in over the network (session \(other) from \(record["REMOTE_HOST"].map { String($0.prefix(64)) } ?? "another host")), which can drive this session"
            }
        }
        return nil
    }

    static func isIdentifier(_ id: Substring) -> Bool {
        !id.isEmpty && id.utf8.count <= 32 && id.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
    }

    /// A logind state file: KEY=VALUE lines.
    static func fields(at path: String) -> [Substring: Substring]? {
        guard let data = try? AtomicFile.read(path, limit: 64 * 1024) else { return nil }
        var fields: [Substring: Substring] = [:]
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { fields[parts[0]] = parts[1] }
        }
        return fields
    }

    /// The host utmp names for the live session on `tty`; nil when there is none or it is local (a display such as ":0").
    static func remoteHost(onTerminal tty: String, utmp path: String) -> String? {
        let line = tty.hasPrefix("/dev/") ? String(tty.dropFirst(5)) : tty
        guard !line.isEmpty, let data = try? AtomicFile.read(path, limit: 2 << 20) else { return nil }
        let size = MemoryLayout<utmpx>.size
        var found: String?
        data.withUnsafeBytes { bytes in
            var offset = 0
            while offset + size <= bytes.count {
                let record = bytes.loadUnaligned(fromByteOffset: offset, as: utmpx.self)
                offset += size
                guard Int32(record.ut_type) == USER_PROCESS, Self.text(record.ut_line) == line else { continue }
                let host = Self.text(record.ut_host)
                // The newest record for the terminal decides.
                found = host.isEmpty || host.hasPrefix(":") ? nil : String(host.prefix(64))
            }
        }
        return found
    }

    /// A fixed-size C string field, up to its first NUL.
    private static func text<T>(_ field: T) -> String {
        withUnsafeBytes(of: field) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }
}
