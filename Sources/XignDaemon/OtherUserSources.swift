import Foundation

/// The host's other sources of users and groups, beside /etc/passwd and /etc/group (which DirectoryCache reads):
/// what nsswitch.conf lists for `passwd` and `group` but files and xign (SSSD's `sss`, `ldap`, `systemd` for homed and
/// dynamic users, `extrausers` …). Each is asked through its own NSS module, as `getent -s SOURCE` does, never through
/// glibc's NSS as a whole, which would come back to xign itself (docs/security.md, H5). The module, loaded into every
/// process, reads only the files; xignd, which writes the cache, asks these.
///
/// A source that does not answer (SSSD down) says nothing: its users are not known here then, and a later refresh
/// asks again. Answers are kept for `memoryMilliseconds`, so a refresh every five minutes does not ask a directory
/// server about every account each time.
final class OtherUserSources: @unchecked Sendable {
    let sources: [Source]
    private let memoryMilliseconds: Int64
    private let lock = NSLock()
    private var remembered: [String: (owner: String?, at: Int64)] = [:]

    init(nsswitch path: String = "/etc/nsswitch.conf", memoryMilliseconds: Int64 = 3_600_000) {
        self.memoryMilliseconds = memoryMilliseconds
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        var names: [String] = []
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: "#", maxSplits: 1).first?.split(whereSeparator: {
                $0 == " " || $0 == "\t"
            })
            guard let fields, let database = fields.first, database == "passwd:" || database == "group:" else {
                continue
            }
            for service in fields.dropFirst() where !service.hasPrefix("[") {
                let name = String(service)
                if !["files", "compat", "xign"].contains(name), !names.contains(name),
                    name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") })
                {
                    names.append(name)
                }
            }
        }
        sources = names.compactMap(Source.init(named:))
    }

    /// The source, if any, that has a user or group of this name.
    func owner(ofName name: String) -> String? {
        remembering("n:" + name) { source in source.has(name: name) }
    }

    /// The source, if any, that has a user or group of this number.
    func owner(ofId id: Int64) -> String? {
        guard let number = UInt32(exactly: id) else { return nil }
        return remembering("i:\(id)") { source in source.has(id: number) }
    }

    private func remembering(_ key: String, _ asks: (Source) -> Bool) -> String? {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        if let kept = lock.withLock({ remembered[key] }), now - kept.at < memoryMilliseconds { return kept.owner }
        let owner = sources.first(where: asks)?.name
        lock.withLock { remembered[key] = (owner, now) }
        return owner
    }

    /// One NSS module, by its functions (`_nss_NAME_getpwnam_r` and the like).
    struct Source: @unchecked Sendable {
        /// `_nss_NAME_getpwnam_r` and `_nss_NAME_getgrnam_r`; the entry (a passwd or a group) is the second argument.
        typealias ByName =
            @convention(c) (
                UnsafePointer<CChar>, UnsafeMutableRawPointer, UnsafeMutablePointer<CChar>, Int,
                UnsafeMutablePointer<Int32>
            ) -> Int32
        typealias ByNumber =
            @convention(c) (
                UInt32, UnsafeMutableRawPointer, UnsafeMutablePointer<CChar>, Int, UnsafeMutablePointer<Int32>
            ) -> Int32

        let name: String
        let userByName: ByName?
        let userById: ByNumber?
        let groupByName: ByName?
        let groupById: ByNumber?

        /// The module `libnss_NAME.so.2`, or nil where it is not installed.
        init?(named name: String) {
            guard let library = dlopen("libnss_\(name).so.2", RTLD_NOW | RTLD_LOCAL) else { return nil }
            func function<T>(_ what: String, as: T.Type) -> T? {
                dlsym(library, "_nss_\(name)_\(what)").map { unsafeBitCast($0, to: T.self) }
            }
            self.name = name
            userByName = function("getpwnam_r", as: ByName.self)
            userById = function("getpwuid_r", as: ByNumber.self)
            groupByName = function("getgrnam_r", as: ByName.self)
            groupById = function("getgrgid_r", as: ByNumber.self)
        }

        func has(name: String) -> Bool {
            Self.found(passwd.self) { userByName?(name, $0, $1, Self.bufferSize, $2) }
                || Self.found(group.self) { groupByName?(name, $0, $1, Self.bufferSize, $2) }
        }

        func has(id: UInt32) -> Bool {
            Self.found(passwd.self) { userById?(id, $0, $1, Self.bufferSize, $2) }
                || Self.found(group.self) { groupById?(id, $0, $1, Self.bufferSize, $2) }
        }

        static let bufferSize = 256 * 1024

        /// Whether the module found the entry: `NSS_STATUS_SUCCESS`, or `NSS_STATUS_TRYAGAIN` with ERANGE, which says
        /// an entry is there but larger than the buffer (a group with many members).
        private static func found<Entry>(
            _ entry: Entry.Type,
            _ ask: (UnsafeMutableRawPointer, UnsafeMutablePointer<CChar>, UnsafeMutablePointer<Int32>) -> Int32?
        ) -> Bool {
            let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: bufferSize)
            let record = UnsafeMutableRawPointer.allocate(
                byteCount: MemoryLayout<Entry>.size, alignment: MemoryLayout<Entry>.alignment)
            defer {
                buffer.deallocate()
                record.deallocate()
            }
            var error: Int32 = 0
            guard let status = ask(record, buffer, &error) else { return false }
            return status == 1 || (status == -2 && error == ERANGE)
        }
    }
}
