import FoundationEssentials
import XignCrypto

#if canImport(Glibc)
import Glibc
#endif

/// What fprintd holds for one user, as one digest (the Nevis SDK's invalidateOnNewOsBiometrics): a finger
/// added, deleted or enrolled again changes it, so a factor bound to it stops counting.
///
/// fprintd keeps each print as a file under `<directory>/<user>/<driver>/<device>/<finger>`, readable by root
/// only. The digest covers every file's path, content and modification time: enrolling the same finger again
/// writes a new file even where the reader's template comes out the same.
public enum FingerprintEnrolment {
    public static let defaultDirectory = "/var/lib/fprint"
    /// fprintd stores a handful of small files per user; anything beyond this is not fprintd's.
    static let maximumFiles = 64
    static let maximumFileSize = 1 << 20

    public struct EnrolmentError: Error, CustomStringConvertible, Equatable {
        public let description: String
    }

    /// The digest (base64url SHA-256) of `user`'s stored prints under `directory`; a user without prints has one too.
    public static func digest(user: String, directory: String = defaultDirectory) throws -> String {
        guard !user.isEmpty, user.utf8.count <= 64, !user.contains("/"), user != ".", user != ".." else {
            throw EnrolmentError(description: "'\(user.prefix(64))' is not a user name fprintd stores prints under")
        }
        var record = Data("xign-fingerprint-enrolment-v1\0".utf8)
        var files = 0
        try walk("\(directory)/\(user)", relative: "", depth: 0) { relative, status, content in
            files += 1
            guard files <= maximumFiles else {
                throw EnrolmentError(
                    description:
                        "more than \(maximumFiles) files under \(directory)/\(user); that is not fprintd's storage")
            }
            record.append(Data("\(relative)\0\(status.st_mtim.tv_sec).\(status.st_mtim.tv_nsec)\0".utf8))
            record.append(SHA256.hash(content))
        }
        return Base64URL.encode(SHA256.hash(record))
    }

    /// Calls `visit` for each regular file below `path` in name order; never follows a symbolic link.
    private static func walk(
        _ path: String, relative: String, depth: Int, _ visit: (String, stat, Data) throws -> Void
    ) throws {
        guard depth <= 4 else {
            throw EnrolmentError(description: "\(path) is nested deeper than fprintd stores prints")
        }
        guard let directory = opendir(path) else {
            if errno == ENOENT { return }
            throw EnrolmentError(description: deniedOr("cannot read \(path)", errno))
        }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
            if names.count > maximumFiles { break }
        }
        closedir(directory)
        for name in names.sorted() {
            let child = "\(path)/\(name)"
            var status = stat()
            guard lstat(child, &status) == 0 else {
                throw EnrolmentError(description: deniedOr("cannot read \(child)", errno))
            }
            switch status.st_mode & S_IFMT {
            case S_IFDIR:
                try walk(child, relative: "\(relative)/\(name)", depth: depth + 1, visit)
            case S_IFREG:
                guard status.st_size <= maximumFileSize else {
                    throw EnrolmentError(description: "\(child) is larger than a print")
                }
                try visit("\(relative)/\(name)", status, try contents(of: child, size: Int(status.st_size)))
            default:
                throw EnrolmentError(
                    description: "\(child) is neither a file nor a directory; fprintd writes only those")
            }
        }
    }

    private static func contents(of path: String, size: Int) throws -> Data {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { throw EnrolmentError(description: deniedOr("cannot read \(path)", errno)) }
        defer { close(descriptor) }
        var data = Data(count: size + 1)
        let count = data.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, size + 1) }
        guard count >= 0, count <= size else {
            throw EnrolmentError(description: "\(path) changed while it was read; try again")
        }
        return data.prefix(count)
    }

    private static func deniedOr(_ what: String, _ code: Int32) -> String {
        code == EACCES || code == EPERM
            ? "\(what): fprintd's prints are readable by root only, so the finger can be checked only by root or xignd"
            : "\(what): \(String(cString: strerror(code)))"
    }
}
