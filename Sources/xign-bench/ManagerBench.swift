import Foundation
import Synchronization
import XignCore
import XignCrypto
import XignHarness
import XignLogin
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// `make bench-manager`: complete logins per second against xign-manager (SQLite and PostgreSQL) from 1, 8 and 32
/// concurrent clients, and privacyIDEA answering /validate/check under the same load generator in the same run.
enum ManagerBench {
    static let pin = "24680"
    static let concurrencies = [1, 8, 32]
    /// Enough clients for the highest concurrency, each with its own enrolment, as many users on many machines.
    static let clientCount = 32

    struct Load {
        var operations = 0
        var failures: [String] = []
        var latencies: [Double] = []
        var seconds = 0.0
        var perSecond: Double { Double(operations) / seconds }
        func percentile(_ p: Double) -> Double {
            let sorted = latencies.sorted()
            return sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))]
        }
    }

    struct Row {
        var system: String
        var clients: Int
        var load: Load
        var rssKiB: Int
        /// CPU time per login of the server's processes and of the load generator (this process).
        var serverCPU: Double
        var clientCPU: Double
        /// The part of `serverCPU` that PostgreSQL's processes spent, where the server has them.
        var databaseCPU: Double?
    }

    /// CPU seconds (user + system) a process and its waited-for children used so far, from /proc.
    static func cpuSeconds(_ pid: Int32) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the name: state is field 3, utime 14, stime 15, and the reaped children's cutime 16, cstime 17 (a
        // PostgreSQL backend that ends during a run moves its time to the postmaster, and is not lost).
        let ticks = [11, 12, 13, 14].compactMap { fields.count > $0 ? Double(fields[$0]) : nil }.reduce(0, +)
        return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// `drive`, with the CPU time the server processes (`pids()`) and this process spent per completed operation.
    static func measured(
        _ system: String, clients: Int, seconds: Double, server pids: () -> [Int32], of database: TestDatabase? = nil,
        rss: () -> Int = { 0 },
        _ operation: @escaping @Sendable (Int) throws -> Void
    ) throws -> Row {
        let postgreSQL = { database == .postgreSQL ? processes(named: "postgres").map(cpuSeconds).reduce(0, +) : 0 }
        let serverBefore = pids().map(cpuSeconds).reduce(0, +), clientBefore = cpuSeconds(getpid()),
            databaseBefore = postgreSQL()
        let load = try drive(clients: clients, seconds: seconds, operation)
        let serverAfter = pids().map(cpuSeconds).reduce(0, +), clientAfter = cpuSeconds(getpid()),
            databaseAfter = postgreSQL()
        // The CPU covers the warm-up second and the requests still running at the end, so it is divided by the
        // operations of the whole run, estimated from the rate.
        let operations = max(1, load.perSecond * (seconds + 1))
        let row = Row(
            system: system, clients: clients, load: load, rssKiB: rss(),
            serverCPU: (serverAfter - serverBefore) / operations * 1000,
            clientCPU: (clientAfter - clientBefore) / operations * 1000,
            databaseCPU: database == .postgreSQL ? (databaseAfter - databaseBefore) / operations * 1000 : nil)
        report(row)
        return row
    }

    /// pam_xign.so and the harness that hosts it, for the waiting figures' real PAM logins.
    struct PAMModule {
        let module: String, harnessSource: String
    }

    /// `only` limits the run to some of logins and waiting (10,000 waiting hosts) on sqlite and postgresql, and privacyidea.
    static func run(seconds: Double, only: Set<String>, pam: PAMModule?) throws {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        print(
            "xign bench-manager: \(cores) cores, \(Int(seconds)) s per run after 1 s of warm-up; the manager at its defaults (PIN verifier PBKDF2-SHA256 10,000 + pepper)"
        )
        print(
            "A login is what pam_xign does, in 3 HTTP requests: a challenge, the start, and the finish with the device signature and the PIN, answered with the login token."
        )
        print(
            "SQLite in WAL with synchronous=FULL; PostgreSQL 15 with its durable defaults (fsync, synchronous_commit), on this machine's disk."
        )
        var rows: [Row] = []
        // The floor, in this run: the PIN hash no login can skip.
        let pinHash = Bench.measure("PIN hash", runs: 50) { _ in
            _ = try? PBKDF2.deriveKey(password: Data(pin.utf8), salt: Data(count: 16), iterations: 10_000)
        }.median
        print(String(format: "The floor, measured here: the PIN hash (PBKDF2-SHA256 10,000) takes %.2f ms.", pinHash))
        if only.contains("postgresql") { _ = try PostgreSQLServer.shared(durable: true) }
        for database in TestDatabase.allCases
        where only.contains("logins") && only.contains(database == .sqlite ? "sqlite" : "postgresql") {
            let manager = try ManagerProcess(config: config, database: database)
            defer { manager.stop() }
            let clients = try enrol(clientCount, at: manager)
            let system = "xign-manager, \(database == .sqlite ? "SQLite" : "PostgreSQL")"
            for n in concurrencies {
                let before = try serverTime(manager)
                let statementsBefore = try manager.metric("xign_database_statements_total")
                defer {
                    // Where one client's login goes: the manager's own time per request, the rest is client and network.
                    if n == 1, let after = try? serverTime(manager),
                        let statements = try? manager.metric("xign_database_statements_total")
                    {
                        let parts = loginRoutes.map { route -> String in
                            let seconds = (after[route]?.seconds ?? 0) - (before[route]?.seconds ?? 0)
                            let count = (after[route]?.count ?? 0) - (before[route]?.count ?? 0)
                            return String(format: "%@ %.2f ms", route, count > 0 ? seconds / count * 1000 : .nan)
                        }
                        let logins =
                            after[APIPath.authenticationFinish].map {
                                $0.count - (before[APIPath.authenticationFinish]?.count ?? 0)
                            } ?? .nan
                        print("    inside the manager, mean per request: " + parts.joined(separator: ", "))
                        print(
                            String(
                                format: "    database statements per login: %.1f",
                                (statements - statementsBefore) / logins))
                    }
                }
                rows.append(
                    try measured(
                        system, clients: n, seconds: seconds, server: server([manager], database: database),
                        of: database, rss: { rss(manager.pid) }
                    ) {
                        try clients[$0].login()
                    })
            }
            try printFloor(
                of: manager, database: database, rows: rows.filter { $0.system == system }, pinHash: pinHash,
                seconds: seconds)
        }
        for cost in ["default", "pbkdf2"] where only.contains("privacyidea") {
            let peer = try PrivacyIDEA(cost: cost, workers: cores)
            defer { peer.stop() }
            let system =
                cost == "default" ? "privacyIDEA 3.14, argon2 (its default)" : "privacyIDEA 3.14, PBKDF2-SHA256 10,000"
            for n in concurrencies {
                rows.append(
                    try measured(system, clients: n, seconds: seconds, server: { peer.pids }, rss: { peer.rssKiB() }) {
                        _ in try peer.check()
                    })
            }
        }
        print(
            "\nsystem".padding(toLength: 44, withPad: " ", startingAt: 0)
                + "clients   logins/s   p50 ms    p99 ms    RSS MiB   server CPU ms/login   client CPU ms/login   failures"
        )
        for row in rows {
            print(
                row.system.padding(toLength: 43, withPad: " ", startingAt: 0)
                    + String(
                        format: "%7d   %8.1f   %7.1f   %7.1f   %7.1f   %19.2f   %19.2f   %d", row.clients,
                        row.load.perSecond,
                        row.load.percentile(0.5),
                        row.load.percentile(0.99), Double(row.rssKiB) / 1024, row.serverCPU, row.clientCPU,
                        row.load.failures.count))
        }
        print("\nRatio of logins per second, xign-manager on SQLite to privacyIDEA, at the same concurrency:")
        for n in concurrencies {
            guard let ours = rows.first(where: { $0.system.hasSuffix("SQLite") && $0.clients == n }) else { continue }
            let peers = rows.filter { $0.system.hasPrefix("privacyIDEA") && $0.clients == n }
            print(
                "  \(n) client\(n == 1 ? "" : "s"): "
                    + peers.map { String(format: "%.1f× %@", ours.load.perSecond / $0.load.perSecond, $0.system) }
                    .joined(separator: ", "))
        }
        if let failed = rows.first(where: { !$0.load.failures.isEmpty }) {
            print("\nfirst failure (\(failed.system), \(failed.clients) clients): \(failed.load.failures[0])")
        }
        for database in TestDatabase.allCases
        where only.contains("waiting") && only.contains(database == .sqlite ? "sqlite" : "postgresql") {
            try waitingFigures(database: database, pam: pam)
        }
    }

    /// The managers' processes: on PostgreSQL also the cluster's (this bench's only cluster).
    static func server(_ managers: [ManagerProcess], database: TestDatabase) -> () -> [Int32] {
        { managers.compactMap(\.pid) + (database == .postgreSQL ? processes(named: "postgres") : []) }
    }

    /// CPU per login against the PIN hash, and against the hash plus what three requests that do nothing cost the
    /// server (a login is three requests): what is left is the login's own work, the database's and the crypto's.
    static func printFloor(
        of manager: ManagerProcess, database: TestDatabase, rows: [Row], pinHash: Double, seconds: Double
    ) throws {
        let http = HTTPClient()
        let empty = try measured(
            "GET \(APIPath.health)", clients: 1, seconds: min(seconds, 4),
            server: server([manager], database: database), of: database
        ) {
            _ in
            guard try http.send("GET", to: manager.url, path: APIPath.health).status == 200 else {
                throw TestFailure("health did not answer 200")
            }
        }
        let target = database == .sqlite ? 1.7 : 2.5
        print(
            String(
                format: "    a request that does nothing (GET %@, one kept connection): %.3f ms of server CPU",
                APIPath.health, empty.serverCPU))
        for row in rows {
            print(
                String(
                    format:
                        "    %d client(s): CPU per login %.2f ms = %.1f× the PIN hash (target %.1f×); the hash and 3 empty requests are %.2f ms, %.2f ms is left",
                    row.clients, row.serverCPU, row.serverCPU / pinHash, target, pinHash + 3 * empty.serverCPU,
                    row.serverCPU - pinHash - 3 * empty.serverCPU))
        }
    }

    static func report(_ row: Row) {
        print(
            String(
                format:
                    "  %@, %d client(s): %.1f /s, p50 %.1f ms, p99 %.1f ms, CPU per login: server %.2f ms, load generator %.2f ms",
                row.system,
                row.clients,
                row.load.perSecond, row.load.percentile(0.5), row.load.percentile(0.99), row.serverCPU, row.clientCPU)
                + (row.databaseCPU.map { String(format: " (of the server's, PostgreSQL %.2f ms)", $0) } ?? ""))
        fflush(nil)  // each figure as it is measured, also into a file or a pipe
    }

    /// Defaults, but limits the bench's own registrations would reach; /metrics for the server's own time per request.
    static let config = """
        [limits]
        registrations_per_address = 100000
        decrypts_per_address = 100000
        starts_per_device = 1000000
        connections_per_address = 10000
        [metrics]
        listen = 127.0.0.1:0
        """

    /// The three requests of a login, as the manager's /metrics names them.
    static let loginRoutes = [APIPath.challenges, APIPath.authentications, APIPath.authenticationFinish]

    /// Total seconds and count of the manager's request-duration histogram per route (only 200 and 201 answers).
    static func serverTime(_ manager: ManagerProcess) throws -> [String: (seconds: Double, count: Double)] {
        let text = try metrics(manager)
        var times: [String: (seconds: Double, count: Double)] = [:]
        for sample in text.split(separator: "\n")
        where sample.hasPrefix("http_server_request_duration_")
            && (sample.contains("status_code=\"200\"") || sample.contains("status_code=\"201\""))
        {
            guard let route = loginRoutes.first(where: { sample.contains("http_route=\"\($0)\"") }),
                let value = sample.split(separator: " ").last.flatMap({ Double($0) })
            else { continue }
            if sample.hasPrefix("http_server_request_duration_sum") { times[route, default: (0, 0)].seconds += value }
            if sample.hasPrefix("http_server_request_duration_count") { times[route, default: (0, 0)].count += value }
        }
        return times
    }

    /// The manager's /metrics, at the address its log names.
    static func metrics(_ manager: ManagerProcess) throws -> String {
        let url = try ManagerURL("http://127.0.0.1:\(try manager.metricsPort())")
        return String(decoding: try HTTPClient().send("GET", to: url, path: "/metrics").body, as: UTF8.self)
    }

    /// One enrolled user on one machine: its own SDK and state, as pam_xign sees it. Each is driven by one thread only.
    struct Client: @unchecked Sendable {
        let sdk: XignSdk
        let idmIdentifier: String
        let user: String

        func login() throws {
            let enrolment = try sdk.store.entity(idmIdentifier)
            let login = LocalLogin(
                sdk: sdk, enrolment: enrolment, service: "pam", role: "login",
                conversation: BenchConversation(pin: ManagerBench.pin))
            let outcome = try login.run()
            guard outcome == .signedIn else {
                throw XignSdkError(.invalidManagerResponse, "the login ended in \(outcome.logWord)")
            }
        }

        /// Approves a login confirmation from this device with the code and the PIN, as `xign-setup approve` does.
        func approve(_ confirmationId: String, code: String, pin: String = ManagerBench.pin) throws {
            let authenticator = sdk.authenticator
            let request = try authenticator.startAuthenticationSynchronous(
                confirmation: ConfirmationInitializationData(
                    idmIdentifier: idmIdentifier, confirmationId: confirmationId, code: code))
            guard
                case .success(let information) = try authenticator.prepareAuthenticationUserInformationSynchronous(
                    request: request)
            else {
                throw XignSdkError(.invalidManagerResponse, "the approval could not be prepared")
            }
            try information.sign(factor: DeviceFactor())
            try information.sign(factor: PinFactor(pin))
            guard case .userLogin = try authenticator.finishConfirmationSynchronous(userInfo: information) else {
                throw XignSdkError(.invalidManagerResponse, "the approval did not end in userLogin")
            }
        }
    }

    /// `caFile`: what the clients trust, for a manager with a certificate of the tests' CA.
    /// A host named `name` joined to `manager` (its software host key in `state`), as `xign-setup join` makes one;
    /// `url`: where the host reaches the manager, its own address unless given.
    static func joinedHost(
        _ name: String, at manager: ManagerProcess, state: String, url: ManagerURL? = nil
    ) throws -> XignSdk {
        let added = try manager.admin(["hosts", "add", name])
        guard added.status == 0, let token = added.stdout.split(separator: " ").last else {
            throw TestFailure("admin hosts add \(name): \(added.stderr)")
        }
        var configuration = ClientConfiguration()
        configuration.stateDirectory = state
        configuration.deviceKey = .software
        let host = try XignSdk(configuration: configuration, localUser: "root")
        _ = try host.joinHost(managerURL: url ?? manager.url, token: try HostJoinToken(parsing: String(token)))
        return host
    }

    /// `from`: the first client's number, for more clients beside earlier ones.
    static func enrol(
        _ count: Int, at manager: ManagerProcess, caFile: String? = nil, from first: Int = 0
    ) throws
        -> [Client]
    {
        try (first..<(first + count)).map { index in
            var configuration = ClientConfiguration()
            configuration.stateDirectory = manager.directory.file("state\(index)")
            configuration.deviceKey = .software
            configuration.http.caFile = caFile
            let user = "bench\(index)", email = "bench\(index)@example.org"
            let sdk = try XignSdk(configuration: configuration, localUser: user)
            let parameters = try sdk.registry.initializationSynchronous(url: manager.url)
            parameters.pinSpec.setPin(pin)
            parameters.selection?.info.email?.setValue(value: email)
            _ = try sdk.registry.registerSynchronous(data: parameters)
            let mail = try PersonalizationInitializationData(
                parsingMail: try String(contentsOfFile: try manager.mailPath(for: email), encoding: .utf8))
            guard
                case .newPersonalization(let personalization) = try sdk.personalizer()
                    .decryptPersonalizationInitializationDataSynchronous(
                        data: mail, pin: pin)
            else {
                throw XignSdkError(.invalidManagerResponse, "expected newPersonalization")
            }
            let result = try sdk.personalizer().personalizeIdentityManagerSynchronous(parameters: personalization)
            return Client(sdk: sdk, idmIdentifier: result.idmIdentifier, user: user)
        }
    }

    /// `clients` threads run `operation` back to back for a warm-up second and then `seconds`; what completes in
    /// those `seconds` counts.
    static func drive(
        clients: Int, seconds: Double, _ operation: @escaping @Sendable (Int) throws -> Void
    ) throws -> Load {
        let start = DispatchTime.now().uptimeNanoseconds
        let measureFrom = start + 1_000_000_000, end = measureFrom + UInt64(seconds * 1e9)
        let results = Mutex([Load]())
        let group = DispatchGroup()
        for client in 0..<clients {
            group.enter()
            Thread.detachNewThread {
                var load = Load()
                while true {
                    let began = DispatchTime.now().uptimeNanoseconds
                    guard began < end else { break }
                    let failure: String?
                    do {
                        try operation(client)
                        failure = nil
                    } catch { failure = "\(error)" }
                    let finished = DispatchTime.now().uptimeNanoseconds
                    // What completes inside the window counts, however long it queued: a slow server's throughput.
                    guard finished >= measureFrom, finished <= end else { continue }
                    if let failure {
                        load.failures.append(failure)
                    } else {
                        load.operations += 1
                        load.latencies.append(Double(finished - began) / 1_000_000)
                    }
                }
                results.withLock { $0.append(load) }
                group.leave()
            }
        }
        group.wait()
        var total = Load()
        total.seconds = seconds
        for load in results.withLock({ $0 }) {
            total.operations += load.operations
            total.latencies += load.latencies
            total.failures += load.failures
        }
        return total
    }

    /// The processes whose command name is `name`.
    static func processes(named name: String) -> [Int32] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { entry in
            guard let pid = Int32(entry),
                (try? String(contentsOfFile: "/proc/\(entry)/comm", encoding: .utf8))?.trimmingCharacters(in: .newlines)
                    == name
            else { return nil }
            return pid
        }
    }

    /// The resident set of a process, in KiB.
    static func rss(_ pid: Int32?) -> Int {
        guard let pid, let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        else { return 0 }
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }
}

/// privacyIDEA from PyPI in a venv the bench keeps under .build-bench, on SQLite, served by gunicorn with one
/// worker per core, with one user whose spass token is a PIN alone.
final class PrivacyIDEA: @unchecked Sendable {
    static let venv = FileManager.default.currentDirectoryPath + "/.build-bench/privacyidea-venv"
    let directory = TemporaryDirectory()
    let url: ManagerURL
    private let server: ChildProcess

    init(cost: String, workers: Int) throws {
        let python = Self.venv + "/bin/python"
        if !FileManager.default.isExecutableFile(atPath: Self.venv + "/bin/gunicorn") {
            print("installing privacyIDEA 3.14 and gunicorn from PyPI into \(Self.venv) …")
            try Self.check(
                ChildProcess("/usr/bin/python3", ["-m", "venv", Self.venv], in: directory).wait(timeout: 300))
            try Self.check(
                ChildProcess(Self.venv + "/bin/pip", ["install", "-q", "privacyidea==3.14", "gunicorn"], in: directory)
                    .wait(timeout: 1200))
        }
        let setup = FileManager.default.currentDirectoryPath + "/bench/privacyidea_setup.py"
        try Self.check(
            ChildProcess(python, [setup, directory.path, cost, ManagerBench.pin], in: directory).wait(timeout: 300))
        let app =
            "privacyidea.app:create_app(config_name='production', config_file='\(directory.path)/pi.cfg', silent=True)"
        server = try ChildProcess(
            Self.venv + "/bin/gunicorn",
            ["-w", "\(workers)", "-b", "127.0.0.1:0", "--timeout", "120", "--chdir", directory.path, app], in: directory
        )
        var port = 0
        let deadline = Date().addingTimeInterval(60)
        while port == 0 {
            let log = (try? String(contentsOfFile: server.stderrPath, encoding: .utf8)) ?? ""
            if let match = log.range(of: #"Listening at: http://127\.0\.0\.1:(\d+)"#, options: .regularExpression) {
                port = Int(log[match].split(separator: ":").last ?? "") ?? 0
            }
            if let result = server.poll() {
                throw TestFailure("gunicorn exited with \(result.status): \(result.stderr.suffix(600))")
            }
            guard Date() < deadline else { throw TestFailure("privacyIDEA did not start") }
            usleep(50_000)
        }
        url = try ManagerURL("http://127.0.0.1:\(port)")
        // The workers boot lazily; wait until one answers.
        while (try? check()) == nil, Date() < deadline { usleep(100_000) }
    }

    private static func check(_ result: ChildProcess.Result) throws {
        guard result.status == 0 else { throw TestFailure("privacyIDEA setup failed: \(result.stderr.suffix(800))") }
    }

    private static let client: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.timeoutMilliseconds = 120_000
        return HTTPClient(configuration: configuration)
    }()

    /// One /validate/check of the user's PIN; throws unless it is accepted.
    func check() throws {
        let response = try Self.client.send(
            "POST", to: url, path: "/validate/check",
            body: Data(#"{"user": "bench", "realm": "bench", "pass": "\#(ManagerBench.pin)"}"#.utf8))
        let text = String(decoding: response.body, as: UTF8.self)
        guard response.status == 200, text.contains("\"value\": true") else {
            throw TestFailure("privacyIDEA answered \(response.status): \(text.prefix(200))")
        }
    }

    /// gunicorn's master and its workers.
    var pids: [Int32] {
        let children =
            (try? String(contentsOfFile: "/proc/\(server.pid)/task/\(server.pid)/children", encoding: .utf8)) ?? ""
        return [server.pid] + children.split(separator: " ").compactMap { Int32($0) }
    }

    func rssKiB() -> Int { pids.reduce(0) { $0 + ManagerBench.rss($1) } }

    func stop() { server.stop() }
}
