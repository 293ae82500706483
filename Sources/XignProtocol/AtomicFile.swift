import FoundationEssentials

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Whole-file reads and writes with the guarantees docs/design.md invariant 7 asks for:
/// a write goes to a temp file in the same directory, is fsynced, then renamed over the target,
/// so a reader sees the old file or the new one and never half of either.
public enum AtomicFile {
    public struct Failure: Error, Equatable, CustomStringConvertible {
        public let description: String
        public let code: Int32
    }

    private static func failure(_ what: String, _ path: String, _ code: Int32 = errno) -> Failure {
        Failure(description: "\(what) \(path): \(String(cString: strerror(code)))", code: code)
    }

    /// Writes `data` to `path` with `mode`, atomically.
    public static func write(_ data: Data, to path: String, mode: mode_t = 0o600) throws {
        let directory = parent(of: path)
        let temporary = "\(directory)/.\(basename(of: path)).\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode)
        guard fd >= 0 else { throw failure("cannot write in", directory) }
        var ok = false
        defer {
            if !ok { unlink(temporary) }
        }
        do {
            defer { close(fd) }
            guard fchmod(fd, mode) == 0 else { throw failure("cannot set the mode of", temporary) }
            try data.withUnsafeBytes { raw in
                var offset = 0
                while offset < raw.count {
                    let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                    if n < 0 {
                        if errno == EINTR { continue }
                        throw failure("cannot write", temporary)
                    }
                    offset += n
                }
            }
            guard fsync(fd) == 0 else { throw failure("cannot flush", temporary) }
        }
        guard rename(temporary, path) == 0 else { throw failure("cannot replace", path) }
        ok = true
        // Make the rename itself durable.
        let dirFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dirFD >= 0 {
            fsync(dirFD)
            close(dirFD)
        }
    }

    /// Reads at most `limit` bytes; a larger file is an error, not a truncation. Returns nil if it does not exist.
    public static func read(_ path: String, limit: Int) throws -> Data? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw failure("cannot read", path)
        }
        defer { close(fd) }
        return try readAll(fd, path, limit: limit)
    }

    /// A file that a process with privileges must not believe: someone other than root could have written it.
    public struct UntrustedFile: Error, CustomStringConvertible {
        public let description: String
    }

    /// Reads like `read`, but only a regular file that root (or this process's own user) owns and that neither its
    /// group nor others may write, as pam-u2f's open_safely does: what it says decides who logs in. The check is on
    /// the open descriptor, so nobody can swap the file between check and read.
    public static func readTrusted(_ path: String, limit: Int) throws -> Data? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        if fd < 0 {
            if errno == ENOENT { return nil }
            if errno == ELOOP {
                throw UntrustedFile(description: "\(path) is a symbolic link; put the file itself there")
            }
            throw failure("cannot read", path)
        }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw failure("cannot read", path) }
        guard status.st_mode & S_IFMT == S_IFREG else {
            throw UntrustedFile(description: "\(path) is not a regular file")
        }
        guard status.st_uid == 0 || status.st_uid == geteuid() else {
            throw UntrustedFile(
                description: "\(path) is owned by uid \(status.st_uid), not root; run: chown root: \(path)")
        }
        guard status.st_mode & 0o022 == 0 else {
            throw UntrustedFile(description: "\(path) can be written by its group or others; run: chmod go-w \(path)")
        }
        return try readAll(fd, path, limit: limit)
    }

    private static func readAll(_ fd: Int32, _ path: String, limit: Int) throws -> Data {
        var buffer = [UInt8](repeating: 0, count: limit + 1)
        var total = 0
        while total <= limit {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + total, limit + 1 - total) }
            if n < 0 {
                if errno == EINTR { continue }
                throw failure("cannot read", path)
            }
            if n == 0 { break }
            total += n
        }
        guard total <= limit else { throw Failure(description: "\(path) is larger than \(limit) bytes", code: EFBIG) }
        return Data(buffer.prefix(total))
    }

    /// Creates `path` (and missing parents) with `mode`; an existing directory keeps its mode unless `enforceMode`.
    public static func makeDirectory(_ path: String, mode: mode_t = 0o700, enforceMode: Bool = false) throws {
        var st = stat()
        if stat(path, &st) == 0 {
            guard (st.st_mode & S_IFMT) == S_IFDIR else {
                throw Failure(description: "\(path) exists and is not a directory", code: ENOTDIR)
            }
            if enforceMode && (st.st_mode & 0o777) != mode {
                guard chmod(path, mode) == 0 else { throw failure("cannot chmod", path) }
            }
            return
        }
        let up = parent(of: path)
        if up != path && up != "/" && up != "." { try makeDirectory(up, mode: mode) }
        guard mkdir(path, mode) == 0 || errno == EEXIST else { throw failure("cannot create directory", path) }
        _ = chmod(path, mode)
    }

    public static func remove(_ path: String) throws {
        guard unlink(path) == 0 || errno == ENOENT else { throw failure("cannot remove", path) }
    }

    /// Runs `body` while holding an exclusive flock on `lockPath`, so read-modify-write cycles do not interleave.
    public static func withExclusiveLock<T>(_ lockPath: String, _ body: () throws -> T) throws -> T {
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw failure("cannot open lock file", lockPath) }
        defer { close(fd) }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else { throw failure("cannot lock", lockPath) }
        }
        defer { flock(fd, LOCK_UN) }
        return try body()
    }

    public static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    static func basename(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return path }
        return String(path[path.index(after: slash)...])
    }
}
