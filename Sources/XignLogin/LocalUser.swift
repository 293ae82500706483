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

    /// The uids of people's accounts: UID_MIN to UID_MAX in /etc/login.defs (1000 to 60000 where it says nothing).
    public static func personUIDs(loginDefs path: String = "/etc/login.defs") -> ClosedRange<UInt32> {
        var (first, last): (UInt32, UInt32) = (1000, 60000)
        if let data = try? AtomicFile.read(path, limit: 256 * 1024) {
            for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
                let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
                guard fields.count >= 2, let uid = UInt32(fields[1]) else { continue }
                if fields[0] == "UID_MIN" { first = uid } else if fields[0] == "UID_MAX" { last = uid }
            }
        }
        return first <= last ? first...last : 1000...60000
    }

    /// A system account: root, a daemon below UID_MIN, or one above UID_MAX in the 16-bit range, such as nobody and
    /// systemd's dynamic users. Numbers from 65536 on are people from a directory: the manager's own (UnixIdRange),
    /// SSSD's, LDAP's; (uid_t)-1 and -2 are no one's.
    public var isSystemAccount: Bool {
        !Self.personUIDs().contains(uid) && !(UInt32(UnixIdRange.allowed.lowerBound)...UInt32.max - 2).contains(uid)
    }
}
