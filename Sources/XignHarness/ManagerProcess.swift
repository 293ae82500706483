import Foundation
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// The real xign-manager, started on 127.0.0.1 with an ephemeral port over its `ManagerFiles`.
public final class ManagerProcess: ManagerFiles, @unchecked Sendable {
    public private(set) var port: Int = 0
    private var process: ChildProcess?
    /// Runs before xign-manager on its command line, such as prlimit to give it the packaged unit's file limit.
    private let launcher: [String]

    public init(
        config: String = ManagerProcess.testConfig, database: TestDatabase = .sqlite, launcher: [String] = [],
        directory: TemporaryDirectory = TemporaryDirectory(), port: Int = 0
    ) throws {
        self.port = port
        self.launcher = launcher
        try super.init(config: config, database: database, directory: directory)
        try start()
    }

    /// A manager whose public URL is `http://localhost:PORT`, so that a browser may make passkeys for it: WebAuthn takes a
    /// host name as the RP id, never an IP address. It listens on 127.0.0.1 at a port chosen before it starts.
    public static func servingBrowsers(
        config: String = ManagerProcess.testConfig, database: TestDatabase = .sqlite
    ) throws -> ManagerProcess {
        let port = try freePort()
        return try ManagerProcess(
            config: config + "\n[server]\npublic_url = http://localhost:\(port)\n", database: database, port: port)
    }

    /// The public URL of a manager from `servingBrowsers`.
    public var browserURL: String { "http://localhost:\(port)" }

    /// A port nobody listens on at this moment (the kernel's pick for a socket bound to port 0, then closed).
    public static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket: \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else { throw TestFailure("bind: \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// A second instance on `other`'s database, with copies of its signing key and pepper (as an admin distributes them).
    public init(sharingDatabaseWith other: ManagerProcess) throws {
        launcher = other.launcher
        try super.init(sharingDatabaseWith: other)
        try start()
    }

    /// https when the config names a TLS certificate.
    public var url: ManagerURL {
        let tls = ((try? String(contentsOfFile: configPath, encoding: .utf8)) ?? "").contains("tls_certificate")
        return try! ManagerURL("\(tls ? "https" : "http")://127.0.0.1:\(port)")
    }

    /// Sends `signal` to the running server, such as SIGHUP to reload its certificate.
    public func send(_ signal: Int32) {
        process.map { _ = Glibc.kill($0.pid, signal) }
    }
    /// The running server's process id.
    public var pid: Int32? { process?.pid }

    /// Kills the server with SIGKILL, as a crash or a power cut would from the server's point of view.
    public func kill() {
        process?.kill()
        process = nil
    }

    /// Starts (or restarts, keeping the data and port when possible) the server.
    public func start() throws {
        let portFile = directory.file("port")
        try? FileManager.default.removeItem(atPath: portFile)
        let listen = "127.0.0.1:\(port)"
        let command =
            launcher + [
                try Products.path("xign-manager"),
                "serve", "--config", configPath, "--data-dir", dataDirectory, "--listen", listen, "--port-file",
                portFile,
            ]
        let child = try ChildProcess(command[0], Array(command.dropFirst()), in: directory)
        process = child
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if let text = try? String(contentsOfFile: portFile, encoding: .utf8),
                let bound = Int(text.trimmingCharacters(in: .whitespacesAndNewlines))
            {
                port = bound
                return
            }
            if let result = child.poll() {
                throw TestFailure("xign-manager exited with \(result.status): \(result.stderr)")
            }
            usleep(10_000)
        }
        throw TestFailure("xign-manager did not start within 30 s")
    }

    /// What the server printed so far (its log).
    public var log: String {
        guard let process else { return "" }
        return ((try? String(contentsOfFile: process.stdoutPath, encoding: .utf8)) ?? "")
            + ((try? String(contentsOfFile: process.stderrPath, encoding: .utf8)) ?? "")
    }

    /// The port of `/metrics` (`metrics.listen`; port 0 binds any, and the log names it), once the server says.
    public func metricsPort() throws -> Int {
        var port = 0
        let said = waitUntil {
            guard let line = log.split(separator: "\n").first(where: { $0.contains("metrics at http://127.0.0.1:") }),
                let found = line.split(separator: ":").last?.split(separator: "/").first.flatMap({ Int($0) })
            else { return false }
            port = found
            return true
        }
        guard said else { throw TestFailure("the manager did not say where its metrics are") }
        return port
    }

    /// The value of one sample of `/metrics`, such as `xign_database_statements_total`.
    public func metric(_ sample: String) throws -> Double {
        let request = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        guard let text = LoopbackSocket.exchange(request, port: try metricsPort(), from: "127.0.0.1") else {
            throw TestFailure("no answer from /metrics")
        }
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(sample + " ") }),
            let value = line.split(separator: " ").last.flatMap({ Double($0) })
        else { throw TestFailure("no \(sample) in the metrics") }
        return value
    }

    public func stop() {
        process?.stop()
        process = nil
    }

    deinit { stop() }
}
