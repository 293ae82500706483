import FoundationEssentials
import XignCore
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// The covers this host holds, one root-only file per audit session under the state directory's `covers`: which cover
/// the manager opened for the session, for which user (name and uid) and in which boot. Audit session ids start again
/// at each boot, so a record of another boot is never believed. The manager decides at each use; a record only says
/// which cover to ask about.
struct SessionCoverRecords {
    struct Record: Codable, Equatable {
        var cover: SessionCover
        var user: String
        var uid: UInt32
        var boot: String
    }

    let directory: String

    init(stateDirectory: String) { directory = stateDirectory + "/covers" }

    /// The kernel audit session of this process, or nil where none was given (no pam_loginuid in the stack).
    static func currentAuditSession() -> Int64? {
        guard let data = try? AtomicFile.read("/proc/self/sessionid", limit: 32),
            let id = Int64(firstLine(data)),
            AuditSession.valid.contains(id)
        else { return nil }
        return id
    }

    static func currentBoot() -> String {
        (try? AtomicFile.read("/proc/sys/kernel/random/boot_id", limit: 64)).map(firstLine) ?? ""
    }

    private static func firstLine(_ data: Data) -> String {
        String(decoding: data.prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self)
    }

    func save(_ cover: SessionCover, user: String, uid: UInt32) throws {
        try AtomicFile.makeDirectory(directory, mode: 0o700, enforceMode: true)
        let record = Record(cover: cover, user: user, uid: uid, boot: Self.currentBoot())
        try AtomicFile.write(try JSONEncoder().encode(record), to: path(cover.auditSession), mode: 0o600)
    }

    /// The record of `auditSession` in this boot, or nil.
    func record(of auditSession: Int64) -> Record? {
        guard let data = try? AtomicFile.readTrusted(path(auditSession), limit: 4096),
            let record = try? JSONDecoder().decode(Record.self, from: data), record.boot == Self.currentBoot(),
            record.cover.auditSession == auditSession
        else { return nil }
        return record
    }

    func remove(_ auditSession: Int64) { unlink(path(auditSession)) }

    private func path(_ auditSession: Int64) -> String { directory + "/\(auditSession)" }
}
