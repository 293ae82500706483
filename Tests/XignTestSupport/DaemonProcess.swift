import Foundation
import XignLogin

#if canImport(Glibc)
import Glibc
#endif

/// The real xignd, listening at a socket in a test's directory (the tests have no systemd to pass one).
public final class DaemonProcess: @unchecked Sendable {
    public let socketPath: String
    let configPath: String
    let directory: TemporaryDirectory
    public private(set) var process: ChildProcess?

    /// The user directory's cache and socket (a host's), in the test's directory.
    public let userDirectory: String
    let arguments: [String]

    public init(
        configPath: String, socketPath: String? = nil, directory: TemporaryDirectory, arguments: [String] = []
    ) throws {
        self.configPath = configPath
        self.userDirectory = directory.file("nss")
        self.arguments = arguments
        self.directory = directory
        self.socketPath = socketPath ?? directory.file("xignd.sock")
        try start()
    }

    /// Starts xignd and waits until its socket takes connections.
    public func start() throws {
        let child = try ChildProcess(
            try Products.path("xignd"),
            ["--config", configPath, "--socket", socketPath, "--directory", userDirectory] + arguments, in: directory)
        process = child
        let listening = try waitUntil(seconds: 20) {
            if let result = child.poll() { throw TestFailure("xignd exited with \(result.status): \(result.stderr)") }
            return (try? DaemonConnection.connect(path: socketPath, timeoutMilliseconds: 1_000)) != nil
        }
        guard listening else { throw TestFailure("xignd did not listen at \(socketPath) within 20 s") }
    }

    /// Kills xignd with `signal` and waits for it.
    public func kill(_ signal: Int32 = SIGKILL) {
        guard let process else { return }
        Glibc.kill(process.pid, signal)
        _ = try? process.wait(timeout: 10)
        self.process = nil
    }

    public var log: String { process.map { (try? String(contentsOfFile: $0.stderrPath, encoding: .utf8)) ?? "" } ?? "" }

    deinit { kill(SIGTERM) }
}
