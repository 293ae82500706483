import FoundationEssentials
import XignCore
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// Whether a login happens at this machine or comes over the network. The device key is the machine's, so it
/// proves presence only for a login at the machine: over SSH it is there whoever connects, and a local login
/// with it would rest on the PIN alone.
///
/// What counts as remote: sshd itself; a PAM_RHOST (sudo and su may name this host, which stays local); and a
/// host such as sudo or su running inside a session that logind or utmp records as remote. logind's record
/// follows every process of the session, detached ones (tmux, nohup) included; utmp's only the terminal.
struct LoginOrigin {
    let caller: LoginCaller
    let records: ClientConfiguration.SessionRecords

    /// Why the login counts as remote, for the log; nil for a login at this machine.
    var remoteReason: String? {
        if caller.service == "sshd" { return "the service is sshd" }
        if let rhost = caller.rhost, !rhost.isEmpty, !isThisHostNamedByLocalProgram(rhost) {
            return "it comes from \(rhost.prefix(64))"
        }
        if let session = logindSession, let host = Self.remoteHost(inLogindSession: session, directory: records.logindSessionsDirectory) {
            return "it runs in remote session \(session) from \(host)"
        }
        if let tty = caller.tty, let host = Self.remoteHost(onTerminal: tty, utmp: records.utmpPath) {
            return "its terminal \(tty.prefix(32)) is logged in from \(host)"
        }
        return nil
    }

    /// sudo (with pam_rhost) and su set PAM_RHOST to this machine's own name; no remote service is trusted to.
    private func isThisHostNamedByLocalProgram(_ rhost: String) -> Bool {
        guard let service = caller.service, ["sudo", "sudo-i", "su", "su-l"].contains(service) else { return false }
        let name = XignSdk.hostName()
        return rhost == name || rhost.split(separator: ".").first.map(String.init) == name
    }

    /// The logind session of this process, from its cgroup (`…/session-ID.scope`).
    private var logindSession: String? {
        guard let data = try? AtomicFile.read("/proc/self/cgroup", limit: 64 * 1024) else { return nil }
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            for component in line.split(separator: "/") where component.hasPrefix("session-") && component.hasSuffix(".scope") {
                let id = component.dropFirst("session-".count).dropLast(".scope".count)
                if !id.isEmpty, id.utf8.count <= 32, id.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) { return String(id) }
            }
        }
        return nil
    }

    /// REMOTE_HOST (or "somewhere") when logind's record of `session` says REMOTE=1.
    static func remoteHost(inLogindSession session: String, directory: String) -> String? {
        guard let data = try? AtomicFile.read("\(directory)/\(session)", limit: 64 * 1024) else { return nil }
        var fields: [Substring: Substring] = [:]
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { fields[parts[0]] = parts[1] }
        }
        guard fields["REMOTE"] == "1" else { return nil }
        return fields["REMOTE_HOST"].map { String($0.prefix(64)) } ?? "another host"
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
