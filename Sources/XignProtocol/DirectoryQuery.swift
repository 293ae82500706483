/// What the NSS module asks xignd when a name or number is not in the directory cache, and the answer. The module is
/// C (`nss/xign_nss_protocol.h` holds the same layout), so the messages are a few fixed bytes, never JSON:
///
///     query:  "xn" version kind length(2, big-endian) key(length bytes)
///     answer: "xn" version status 0 0
///
/// kind 1 asks for a user or group name (a login name), kind 2 for a uid or gid (4 bytes, big-endian); kind 3 (root's
/// account phase only) has xignd take the manager's word about a name the cache holds. A found answer means the cache
/// now holds it, and the module reads the cache again.
public enum DirectoryQuery: Equatable, Sendable {
    case name(String)
    case id(UInt32)
    /// From root's account phase (pam_xign): the manager's answer about this name differs from the cache; take it now
    /// (a lock drops the account's local groups at once on the host where the person tried).
    case recheck(String)

    public static let version: UInt8 = 1
    public static let headerLength = 6
    /// The longest key: a login name.
    public static let maximumKeyLength = 32

    public enum Malformed: Error, Equatable, CustomStringConvertible {
        case header
        case version(UInt8)
        case kind(UInt8)
        case key

        public var description: String {
            switch self {
            case .header: "the query does not start with xn"
            case .version(let version): "the query is version \(version); this xignd speaks \(DirectoryQuery.version)"
            case .kind(let kind): "the query's kind \(kind) is unknown"
            case .key: "the query's key is not a login name or a 4-byte id"
            }
        }
    }

    /// The length of the key that follows a valid header.
    public static func keyLength(ofHeader header: [UInt8]) throws(Malformed) -> Int {
        guard header.count == headerLength, header[0] == UInt8(ascii: "x"), header[1] == UInt8(ascii: "n") else {
            throw .header
        }
        guard header[2] == version else { throw .version(header[2]) }
        let length = Int(header[4]) << 8 | Int(header[5])
        switch header[3] {
        case 1, 3: guard (1...maximumKeyLength).contains(length) else { throw .key }
        case 2: guard length == 4 else { throw .key }
        default: throw .kind(header[3])
        }
        return length
    }

    /// A whole query: its header and then exactly its key.
    public init(parsing bytes: [UInt8]) throws(Malformed) {
        guard bytes.count >= Self.headerLength else { throw .header }
        let length = try Self.keyLength(ofHeader: Array(bytes[..<Self.headerLength]))
        let key = Array(bytes[Self.headerLength...])
        guard key.count == length else { throw .key }
        if bytes[3] == 2 {
            self = .id(key.reduce(0) { $0 << 8 | UInt32($1) })
            return
        }
        guard let name = String(validating: key, as: UTF8.self), LoginNameValidator.validate(name) == .valid else {
            throw .key
        }
        self = bytes[3] == 3 ? .recheck(name) : .name(name)
    }

    public var loginName: String? {
        switch self {
        case .name(let name), .recheck(let name): name
        case .id: nil
        }
    }
    public var number: UInt32? { if case .id(let id) = self { id } else { nil } }

    public var encoded: [UInt8] {
        switch self {
        case .name(let name), .recheck(let name):
            let key = Array(name.utf8)
            let kind: UInt8 = if case .recheck = self { 3 } else { 1 }
            return [
                UInt8(ascii: "x"), UInt8(ascii: "n"), Self.version, kind, UInt8(key.count >> 8),
                UInt8(key.count & 0xFF),
            ]
                + key
        case .id(let id):
            return [UInt8(ascii: "x"), UInt8(ascii: "n"), Self.version, 2, 0, 4]
                + [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: id >> $0) }
        }
    }

    public enum Answer: UInt8, Sendable {
        /// The cache holds it now.
        case found = 0
        case notFound = 1
        /// The manager could not be asked; the cache is as it was.
        case unavailable = 2

        public var encoded: [UInt8] { [UInt8(ascii: "x"), UInt8(ascii: "n"), DirectoryQuery.version, rawValue, 0, 0] }
    }
}
