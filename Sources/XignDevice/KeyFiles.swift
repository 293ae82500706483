import FoundationEssentials
import XignCrypto

#if canImport(Glibc)
import Glibc
#endif

/// The files of one key store: `<directory>/<reference><suffix>`, 0600 in a 0700 directory.
/// References are checked so no name can leave the directory.
struct KeyFiles {
    let directory: String
    let suffix: String

    func path(_ reference: String) throws -> String {
        guard !reference.isEmpty, reference.count <= 80,
            reference.unicodeScalars.allSatisfy({
                ($0.isASCII && ($0.properties.isAlphabetic || $0.properties.numericType != nil)) || $0 == "-"
                    || $0 == "_"
            })
        else { throw DeviceKeyError("invalid key reference '\(reference.prefix(80))'") }
        return "\(directory)/\(reference)\(suffix)"
    }

    /// A fresh file named `<prefix>…` holding `data`; never overwrites.
    func writePending(_ data: Data, prefix: String = "pending-") throws -> String {
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw DeviceKeyError("cannot create \(directory): \(String(cString: strerror(errno)))")
        }
        let reference = prefix + (try SecureRandom.token(byteCount: 12))
        let file = try path(reference)
        let fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw DeviceKeyError("cannot write \(file): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == data.count, fsync(fd) == 0 else {
            unlink(file)
            throw DeviceKeyError("cannot write \(file): \(String(cString: strerror(errno)))")
        }
        return reference
    }

    func read(_ reference: String, limit: Int = 4096) throws -> Data {
        let file = try path(reference)
        let fd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else {
            throw DeviceKeyError(
                "the device key \(file) cannot be read (\(String(cString: strerror(errno)))); run xign-setup personalize again"
            )
        }
        defer { close(fd) }
        // As for the config (AtomicFile.readTrusted): a key someone else could have written is not this device's.
        var status = stat()
        guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG,
            status.st_uid == 0 || status.st_uid == geteuid(),
            status.st_mode & 0o022 == 0
        else {
            throw DeviceKeyError(
                "the device key \(file) is not a regular file that only root writes; run: chown root: \(file); chmod 0600 \(file)"
            )
        }
        var buffer = [UInt8](repeating: 0, count: limit + 1)
        let n = Glibc.read(fd, &buffer, buffer.count)
        guard n > 0, n <= limit else { throw DeviceKeyError("the device key \(file) is empty or too large") }
        return Data(buffer.prefix(n))
    }

    /// Gives the pending key its name; never over an existing file (link fails on one, where rename would replace it).
    func commit(pending: String, as reference: String) throws {
        let from = try path(pending), to = try path(reference)
        guard link(from, to) == 0 else {
            throw DeviceKeyError("cannot store the device key as \(to): \(String(cString: strerror(errno)))")
        }
        unlink(from)
    }

    func delete(_ reference: String) throws {
        let file = try path(reference)
        guard unlink(file) == 0 || errno == ENOENT else {
            throw DeviceKeyError("cannot delete \(file): \(String(cString: strerror(errno)))")
        }
    }
}
