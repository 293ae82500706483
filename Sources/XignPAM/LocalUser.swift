import FoundationEssentials
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// A user of this machine, from the passwd database.
public struct LocalUser: Sendable {
    public let name: String
    public let uid: UInt32

    public init?(named name: String) {
        guard !name.isEmpty, name.utf8.count <= 64 else { return nil }
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwnam_r(name, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        self.name = name
        uid = entry.pw_uid
    }

    /// The lowest uid of a person's account: UID_MIN in /etc/login.defs, 1000 where it says nothing.
    public static func firstPersonUID(loginDefs path: String = "/etc/login.defs") -> UInt32 {
        guard let data = try? AtomicFile.read(path, limit: 256 * 1024) else { return 1000 }
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            if fields.count >= 2, fields[0] == "UID_MIN", let uid = UInt32(fields[1]) { return uid }
        }
        return 1000
    }

    /// A system account (root, daemons): uid 0 or below UID_MIN.
    public var isSystemAccount: Bool { uid == 0 || uid < Self.firstPersonUID() }
}
