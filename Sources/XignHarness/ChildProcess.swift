import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A child process started with posix_spawn and an empty signal mask, in a process group of its own, so that
/// stopping it stops what it started too (a bus that dbus-run-session started, a greeter under setpriv).
///
/// Foundation.Process children inherit Swift Testing's blocked SIGTERM, so `terminate()` would hang (docs/design.md, "Testing with real parts").
public final class ChildProcess: @unchecked Sendable {
    public let pid: pid_t
    public let stdoutPath: String
    public let stderrPath: String
    private var exitStatus: Int32?

    public struct Result: Sendable {
        public let status: Int32
        public let stdout: String
        public let stderr: String
    }

    /// Starts `executable` with `arguments`. `stdin` is written to a file the child reads; nil gives /dev/null.
    public init(
        _ executable: String, _ arguments: [String], stdin: String? = nil, environment: [String: String]? = nil,
        extraFileDescriptor: (fd: Int32, contents: String)? = nil, in directory: TemporaryDirectory
    ) throws {
        let tag = UUID().uuidString
        stdoutPath = directory.path + "/\(tag).out"
        stderrPath = directory.path + "/\(tag).err"
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        let inputPath = directory.path + "/\(tag).in"
        try writeTestFile(inputPath, Data((stdin ?? "").utf8))
        // Only what is opened here reaches the child, not the sockets and files this test process holds meanwhile
        // (a test holds 1,100 sockets at once, and PostgreSQL refuses to start beside that many inherited descriptors).
        Self.closeDescriptors(from: 3, in: &actions)
        posix_spawn_file_actions_addopen(&actions, 0, stdin == nil ? "/dev/null" : inputPath, O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        if let extra = extraFileDescriptor {
            let path = directory.path + "/\(tag).fd"
            try writeTestFile(path, Data(extra.contents.utf8))
            posix_spawn_file_actions_addopen(&actions, extra.fd, path, O_RDONLY, 0)
        }
        var env = environment ?? ProcessInfo.processInfo.environment
        env["TZ"] = env["TZ"] ?? "UTC"
        pid = try Self.spawn(executable, arguments, environment: env, actions: &actions)
    }

    /// Adds the action that closes every descriptor from `first` up: glibc's posix_spawn_file_actions_addclosefrom_np
    /// (2.34), which Swift's Glibc module does not import.
    static func closeDescriptors(from first: Int32, in actions: inout posix_spawn_file_actions_t) {
        typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np")
        else {
            fatalError("glibc 2.34 or later is needed: posix_spawn_file_actions_addclosefrom_np is missing")
        }
        _ = unsafeBitCast(symbol, to: AddCloseFrom.self)(&actions, first)
    }

    /// posix_spawn with an empty signal mask and default dispositions for the signals tests send (Swift Testing
    /// runs with some blocked, and a child would inherit that), with `actions` for its descriptors; `ownGroup` puts
    /// the child in a process group of its own.
    static func spawn(
        _ executable: String, _ arguments: [String], environment: [String: String],
        actions: inout posix_spawn_file_actions_t,
        ownGroup: Bool = true
    ) throws -> pid_t {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGTERM)
        sigaddset(&defaults, SIGINT)
        sigaddset(&defaults, SIGPIPE)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | (ownGroup ? POSIX_SPAWN_SETPGROUP : 0)))
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        var child: pid_t = 0
        let result = posix_spawn(&child, executable, &actions, &attributes, argv, envp)
        guard result == 0 else { throw TestFailure("posix_spawn \(executable): \(String(cString: strerror(result)))") }
        return child
    }

    /// The result if the child has exited, without waiting and without killing it.
    public func poll() -> Result? {
        if exitStatus == nil {
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                exitStatus = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
            }
        }
        return exitStatus.map { Result(status: $0, stdout: read(stdoutPath), stderr: read(stderrPath)) }
    }

    /// Waits up to `timeout` seconds; kills the child if it has not exited by then.
    @discardableResult
    public func wait(timeout: Double = 60) throws -> Result {
        let deadline = Date().addingTimeInterval(timeout)
        while poll() == nil {
            if Date() > deadline {
                var status: Int32 = 0
                Glibc.kill(-pid, SIGKILL)
                _ = waitpid(pid, &status, 0)
                exitStatus = 137
                throw TestFailure("process \(pid) did not finish within \(timeout) s; stderr: \(read(stderrPath))")
            }
            usleep(5_000)
        }
        return Result(status: exitStatus ?? -1, stdout: read(stdoutPath), stderr: read(stderrPath))
    }

    /// SIGKILL to the child and its group, then reaps the child.
    public func kill() {
        guard exitStatus == nil else { return }
        Glibc.kill(-pid, SIGKILL)
        _ = try? wait(timeout: 10)
    }

    /// SIGTERM to the child's group, then SIGKILL to what is left of it after up to 10 s. Signals go to the group
    /// only while the child is not reaped: until then its pid, the group's number, cannot pass to another process.
    public func stop() {
        guard exitStatus == nil else { return }
        Glibc.kill(-pid, SIGTERM)
        let deadline = Date().addingTimeInterval(10)
        while !isZombie && Date() < deadline { usleep(5_000) }
        Glibc.kill(-pid, SIGKILL)
        _ = try? wait(timeout: 10)
    }

    /// The child has exited and waits to be reaped.
    private var isZombie: Bool {
        let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
        return stat.split(separator: ")").last?.split(separator: " ").first == "Z"
    }

    func read(_ path: String) -> String {
        (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }

    deinit { stop() }
}

/// Writes a file through an O_CLOEXEC descriptor. Tests spawn processes in parallel; a descriptor
/// inherited by another child would keep a file open for writing, and exec'ing it would fail with ETXTBSY.
public func writeTestFile(_ path: String, _ data: Data, mode: mode_t = 0o600) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
    guard fd >= 0 else { throw TestFailure("cannot write \(path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    let written = data.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    guard written == data.count, fchmod(fd, mode) == 0 else { throw TestFailure("cannot write \(path)") }
}

public struct TestFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A directory removed when the value goes away.
public final class TemporaryDirectory: @unchecked Sendable {
    public let path: String

    public init() {
        var template = Array("/tmp/xign-test-XXXXXX".utf8CString)
        path = String(cString: mkdtemp(&template)!)
    }

    public func file(_ name: String) -> String { path + "/" + name }

    public func write(_ name: String, _ contents: String, mode: Int = 0o600) throws -> String {
        let file = file(name)
        try writeTestFile(file, Data(contents.utf8), mode: mode_t(mode))
        return file
    }

    deinit {
        // Files from a test run as another user may be read-only; make them removable first.
        _ = try? FileManager.default.removeItem(atPath: path)
    }
}

/// Locates the built executables next to the test bundle.
public enum Products {
    public static let directory: String = {
        var url = URL(
            fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                ?? CommandLine.arguments[0])
        for _ in 0..<6 {
            url.deleteLastPathComponent()
            if FileManager.default.isExecutableFile(atPath: url.path + "/xign-manager") { return url.path }
        }
        return FileManager.default.currentDirectoryPath + "/.build/debug"
    }()

    public static func path(_ name: String) throws -> String {
        let path = directory + "/" + name
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw TestFailure("\(path) is not built; run `swift build` before `swift test` (make test does)")
        }
        return path
    }
}
