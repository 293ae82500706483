import Foundation

/// A throwaway PostgreSQL cluster for the tests, from Debian's postgresql package: initdb and pg_ctl in a temp
/// dir, run as `nobody` when the tests run as root (PostgreSQL refuses root), on 127.0.0.1 with a password, so the
/// manager's `password_file` path is the one used. One cluster per test process, stopped when it exits; each
/// caller gets a database of its own. Durability settings are off for the tests (they kill managers, never
/// PostgreSQL) and on for `make bench-manager`, whose figures must be what a production cluster pays.
public final class PostgreSQLServer: @unchecked Sendable {
    public let port: Int
    /// The manager's copy of the password (0600, owned by the test user).
    public let passwordFile: String
    /// The CA of the server's certificate (for 127.0.0.1), and one that did not sign it.
    public let certificates: TestCertificates
    private let binaries: String
    private let directory: TemporaryDirectory
    private let password: String

    private static let lock = NSLock()
    nonisolated(unsafe) private static var started: Result<PostgreSQLServer, any Error>?

    /// The cluster of this process, started at the first call, which decides whether it syncs commits to disk.
    public static func shared(durable: Bool = false) throws -> PostgreSQLServer {
        lock.lock()
        defer { lock.unlock() }
        if started == nil { started = Result { try PostgreSQLServer(durable: durable) } }
        return try started!.get()
    }

    private init(durable: Bool) throws {
        binaries = try Self.findBinaries()
        directory = TemporaryDirectory()
        chmod(directory.path, 0o755)
        password = UUID().uuidString
        let asRoot = geteuid() == 0
        let cluster = directory.file("cluster")
        try FileManager.default.createDirectory(atPath: cluster, withIntermediateDirectories: false)
        let initdbPassword = try directory.write("cluster/initdb-password", password + "\n")
        passwordFile = try directory.write("manager-password", password + "\n")
        if asRoot {
            for path in [cluster, initdbPassword] { chown(path, 65534, 65534) }
        }
        // TLS is offered (ssl=on) for the tests of sslmode=verify-full; plain connections stay allowed.
        certificates = try TestCertificates(in: directory)
        let (serverCertificate, serverKey) = (cluster + "/server.pem", cluster + "/server.key")
        try FileManager.default.copyItem(atPath: certificates.valid.certificate, toPath: serverCertificate)
        try FileManager.default.copyItem(atPath: certificates.valid.key, toPath: serverKey)
        chmod(serverKey, 0o600)
        if asRoot { for path in [serverCertificate, serverKey] { chown(path, 65534, 65534) } }
        port = try LoopbackSocket.unusedPort()
        let data = cluster + "/data"
        try run(
            "initdb",
            [
                "-D", data, "-U", "xign", "--pwfile=\(initdbPassword)", "--auth-local=trust",
                "--auth-host=scram-sha-256", "-E", "UTF8",
                "--no-instructions",
            ], asRoot)
        let options =
            "-p \(port) -k \(cluster) -c listen_addresses=127.0.0.1 -c max_connections=300"
            + (durable ? "" : " -c fsync=off -c synchronous_commit=off -c full_page_writes=off")
            + " -c ssl=on -c ssl_cert_file=\(serverCertificate) -c ssl_key_file=\(serverKey)"
        try run("pg_ctl", ["-D", data, "-l", cluster + "/log", "-o", options, "-w", "-t", "60", "start"], asRoot)
        // SIGQUIT is PostgreSQL's immediate shutdown, sent once this process has exited; then the cluster goes.
        let postmaster = try String(contentsOfFile: data + "/postmaster.pid", encoding: .utf8).split(separator: "\n")
            .first.flatMap { pid_t($0) }
        guard let postmaster else { throw TestFailure("PostgreSQL started without a postmaster.pid") }
        RunEnd.stop(postmaster, signal: "QUIT")
        RunEnd.remove(directory.path)
    }

    /// Creates an empty database and returns its name and the manager config lines that use it; `tls` adds
    /// sslmode=verify-full with `caFile`.
    public func makeDatabase(tls caFile: String? = nil) throws -> (name: String, config: String) {
        let name = "xign_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16)
        _ = try query("CREATE DATABASE \(name)")
        return (
            name,
            """
            [storage]
            driver = postgresql
            url = postgres://xign@127.0.0.1:\(port)/\(name)?sslmode=\(caFile == nil ? "disable" : "verify-full")
            password_file = \(passwordFile)
            \(caFile.map { "ca_file = \($0)" } ?? "")
            """
        )
    }

    /// The output of one statement, run as the superuser through psql.
    @discardableResult
    public func query(_ statement: String, database: String = "postgres") throws -> String {
        let result = try ChildProcess(
            "/usr/bin/psql",
            [
                "-h", "127.0.0.1", "-p", "\(port)", "-U", "xign", "-d", database, "-v", "ON_ERROR_STOP=1", "-qAt", "-c",
                statement,
            ],
            environment: ["PGPASSWORD": password, "PATH": "/usr/bin:/bin"], in: directory
        ).wait(timeout: 60)
        guard result.status == 0 else { throw TestFailure("psql \(statement.prefix(60)): \(result.stderr)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func run(_ tool: String, _ arguments: [String], _ asRoot: Bool) throws {
        let command =
            asRoot
            ? (
                "/usr/bin/setpriv",
                ["--reuid=65534", "--regid=65534", "--clear-groups", binaries + "/" + tool] + arguments
            )
            : (binaries + "/" + tool, arguments)
        let result = try ChildProcess(command.0, command.1, in: directory).wait(timeout: 120)
        guard result.status == 0 else {
            let log = (try? String(contentsOfFile: directory.file("cluster/log"), encoding: .utf8)) ?? ""
            throw TestFailure(
                "\(tool) failed (\(result.status)): \(result.stdout) \(result.stderr) \(log.suffix(2000))")
        }
    }

    /// The newest installed PostgreSQL's bin directory.
    public static func findBinaries() throws -> String {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init)
            .sorted()
        guard let newest = versions.last, FileManager.default.isExecutableFile(atPath: "\(root)/\(newest)/bin/initdb")
        else {
            throw TestFailure("PostgreSQL is not installed; run `make deps` (Debian's postgresql package)")
        }
        return "\(root)/\(newest)/bin"
    }
}
