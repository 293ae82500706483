import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A primary and a synchronous standby (Debian's PostgreSQL, streaming replication) on loopback, behind one address
/// that a TCP proxy (socat) forwards to the primary: what a virtual IP, or HAProxy in front of Patroni, gives the
/// managers, which know one host and port. PostgresNIO connects to a single host, so libpq's list of hosts with
/// `target_session_attrs=read-write` is not open to the manager; the proxy is also what most production set-ups
/// run. A failover here is what an operator or Patroni does: the primary dies (SIGKILL), the standby is promoted,
/// and the address moves to it. The clusters run as nobody (PostgreSQL refuses root) with fsync off, which a SIGKILL
/// of the server does not need: the kernel keeps what was written.
public final class ReplicatedPostgreSQL: @unchecked Sendable {
    public let proxyPort: Int
    public let passwordFile: String
    private let primaryPort: Int
    private let standbyPort: Int
    private let directory = TemporaryDirectory()
    private let binaries: String
    private let password = UUID().uuidString
    private var proxy: ChildProcess?
    private let owner: (uid: uid_t, gid: gid_t) = geteuid() == 0 ? (65534, 65534) : (geteuid(), getegid())

    public init() throws {
        binaries = try PostgreSQLServer.findBinaries()
        chmod(directory.path, 0o755)
        (primaryPort, standbyPort, proxyPort) = (
            try LoopbackSocket.unusedPort(), try LoopbackSocket.unusedPort(), try LoopbackSocket.unusedPort()
        )
        passwordFile = try directory.write("manager-password", password + "\n")
        try FileManager.default.createDirectory(atPath: directory.file("clusters"), withIntermediateDirectories: false)
        chown(directory.file("clusters"), owner.uid, owner.gid)
        let initdbPassword = try directory.write("initdb-password", password + "\n")
        chown(initdbPassword, owner.uid, owner.gid)
        try run(
            "initdb",
            [
                "-D", data("primary"), "-U", "xign", "--pwfile=\(initdbPassword)", "--auth-local=trust",
                "--auth-host=scram-sha-256", "-E", "UTF8", "--no-instructions",
            ])
        // Every commit waits until the standby has it: an acknowledged wrong PIN survives the primary.
        try start("primary", port: primaryPort, extra: "-c synchronous_standby_names=standby -c max_wal_senders=4")
        try run(
            "pg_basebackup",
            [
                "-h", "127.0.0.1", "-p", "\(primaryPort)", "-U", "xign", "-D", data("standby"), "-X", "stream", "-c",
                "fast",
            ])
        let conninfo =
            "host=127.0.0.1 port=\(primaryPort) user=xign password=\(password) application_name=standby"
        let auto = data("standby") + "/postgresql.auto.conf"
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: auto))
        handle.seekToEndOfFile()
        handle.write(Data("primary_conninfo = '\(conninfo)'\n".utf8))
        try handle.close()
        try writeTestFile(data("standby") + "/standby.signal", Data())
        chown(data("standby") + "/standby.signal", owner.uid, owner.gid)
        try start("standby", port: standbyPort, extra: "")
        guard
            waitUntil(
                seconds: 30,
                {
                    (try? self.query("SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby'"))
                        == "sync"
                })
        else { throw TestFailure("the standby did not become synchronous: \(log("primary").suffix(1500))") }
        try moveAddress(to: primaryPort)
    }

    /// An empty database on the primary and the manager's `[storage]` lines for it, through the proxy.
    public func makeDatabase() throws -> (name: String, config: String) {
        let name = "xign_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16)
        try query("CREATE DATABASE \(name)")
        return (
            name,
            """
            [storage]
            driver = postgresql
            url = postgres://xign@127.0.0.1:\(proxyPort)/\(name)?sslmode=disable
            password_file = \(passwordFile)
            """
        )
    }

    /// The primary and every process of it end at once, as in a crash of its machine.
    public func killPrimary() throws {
        let pid = try postmaster("primary")
        kill(pid, SIGSTOP)  // no new backend is forked meanwhile
        for child in Self.children(of: pid) { kill(child, SIGKILL) }
        kill(pid, SIGKILL)
        guard waitUntil(seconds: 10, { kill(pid, 0) != 0 && Self.children(of: pid).isEmpty }) else {
            throw TestFailure("the primary's processes outlived SIGKILL")
        }
    }

    /// Promotes the standby (pg_ctl promote, waiting until it takes writes) and moves the address to it.
    public func failOver() throws {
        try run("pg_ctl", ["-D", data("standby"), "-w", "-t", "60", "promote"])
        try moveAddress(to: standbyPort)
    }

    /// One statement, as the superuser through psql, on the server behind the address.
    @discardableResult
    public func query(_ statement: String, database: String = "postgres") throws -> String {
        let result = try ChildProcess(
            "/usr/bin/psql",
            [
                "-h", "127.0.0.1", "-p", "\(proxy == nil ? primaryPort : proxyPort)", "-U", "xign", "-d", database,
                "-v", "ON_ERROR_STOP=1", "-qAt", "-c", statement,
            ],
            environment: ["PGPASSWORD": password, "PATH": "/usr/bin:/bin", "PGCONNECT_TIMEOUT": "5"], in: directory
        ).wait(timeout: 60)
        guard result.status == 0 else { throw TestFailure("psql \(statement.prefix(60)): \(result.stderr)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    deinit {
        proxy?.stop()
        for name in ["primary", "standby"] {
            if let pid = try? postmaster(name) {
                kill(pid, SIGQUIT)
                _ = waitUntil(seconds: 10, { kill(pid, 0) != 0 })
            }
        }
    }

    private func data(_ name: String) -> String { directory.file("clusters/\(name)") }

    private func log(_ name: String) -> String {
        (try? String(contentsOfFile: data(name) + ".log", encoding: .utf8)) ?? ""
    }

    private func start(_ name: String, port: Int, extra: String) throws {
        let options =
            "-p \(port) -k \(directory.file("clusters")) -c listen_addresses=127.0.0.1 -c max_connections=100 -c fsync=off "
            + extra
        let logFile = data(name) + ".log"
        try writeTestFile(logFile, Data(), mode: 0o644)
        chown(logFile, owner.uid, owner.gid)
        try run("pg_ctl", ["-D", data(name), "-l", logFile, "-o", options, "-w", "-t", "60", "start"])
        // Should the test process die first, the cluster goes with it.
        RunEnd.stop(try postmaster(name), signal: "QUIT")
        RunEnd.remove(directory.path)
    }

    private func postmaster(_ name: String) throws -> pid_t {
        let text = try String(contentsOfFile: data(name) + "/postmaster.pid", encoding: .utf8)
        guard let pid = text.split(separator: "\n").first.flatMap({ pid_t($0) }) else {
            throw TestFailure("no postmaster.pid for \(name)")
        }
        return pid
    }

    /// Restarts the proxy so the one address leads to `port`; connections through the old one end.
    private func moveAddress(to port: Int) throws {
        proxy?.kill()
        proxy = try ChildProcess(
            "/usr/bin/socat", ["TCP-LISTEN:\(proxyPort),bind=127.0.0.1,reuseaddr,fork", "TCP:127.0.0.1:\(port)"],
            in: directory)
        guard waitUntil(seconds: 10, { LoopbackSocket.isListening(self.proxyPort) }) else {
            throw TestFailure("socat did not listen on \(proxyPort)")
        }
    }

    private static func children(of parent: pid_t) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(pid_t.init).filter { pid in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let fields = stat.split(separator: ")").last?.split(separator: " "), fields.count > 2
            else { return false }
            return pid_t(fields[2]) == parent
        }
    }

    private func run(_ tool: String, _ arguments: [String]) throws {
        let command =
            geteuid() == 0
            ? (
                "/usr/bin/setpriv",
                ["--reuid=65534", "--regid=65534", "--clear-groups", binaries + "/" + tool] + arguments
            )
            : (binaries + "/" + tool, arguments)
        let result = try ChildProcess(
            command.0, command.1, environment: ["PGPASSWORD": password, "PATH": "/usr/bin:/bin"], in: directory
        ).wait(timeout: 120)
        guard result.status == 0 else {
            throw TestFailure(
                "\(tool) failed (\(result.status)): \(result.stdout) \(result.stderr) \(log("primary").suffix(1000))")
        }
    }
}
