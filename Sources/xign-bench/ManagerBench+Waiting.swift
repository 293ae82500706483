import Foundation
import Synchronization
import XignCore
import XignHarness
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// 10,000 hosts waiting at once for an approval: what they cost the database, the manager's memory and CPU while
/// nothing is decided, and how soon an approval reaches its waiting host with them all waiting, against one waiter.
extension ManagerBench {
    static let waitingAccounts = 100
    static let waitingPerAccount = 100
    /// What pam_xign asks for with its default 10 s timeout.
    static let waitMilliseconds = 9_000
    static let waitingWindow = 30.0

    /// The hosts all connect from 127.0.0.1, so the per-address connection limit is raised above their number.
    static let waitingConfig =
        config.replacingOccurrences(of: "connections_per_address = 10000", with: "connections_per_address = 100000")
            + """

            [confirmation]
            lifetime = 10m
            max_pending = 20
            max_pending_per_account = \(waitingPerAccount)
            """

    /// The packaged unit's file limit (LimitNOFILE), or this machine's hard limit where that is lower.
    static func fileLimit() -> Int {
        var limit = rlimit(rlim_cur: 65536, rlim_max: 65536)
        if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) != 0 {
            getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            limit.rlim_cur = min(limit.rlim_max, 65536)
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        return Int(limit.rlim_cur)
    }

    static func waitingFigures(database: TestDatabase, pam: PAMModule?) throws {
        let files = fileLimit()
        let launcher = ["/usr/bin/prlimit", "--nofile=\(files):\(files)", "--"]
        let first = try ManagerProcess(config: waitingConfig, database: database, launcher: launcher)
        defer { first.stop() }
        // On PostgreSQL, two instances: hosts wait on both, the approvals go through the second.
        let second = database == .postgreSQL ? try ManagerProcess(sharingDatabaseWith: first) : nil
        defer { second?.stop() }
        let instances = [first] + (second.map { [$0] } ?? [])
        do { try waitingFigures(on: instances, database: database, files: files, pam: pam) } catch {
            for manager in instances {
                let warnings = manager.log.split(separator: "\n").filter { $0.hasPrefix("<3>") || $0.hasPrefix("<4>") }
                    .suffix(20)
                print(
                    "manager on port \(manager.port), its last errors and warnings:\n"
                        + warnings.joined(separator: "\n"))
            }
            // An error thrown out of main ends the process without flushing what is printed.
            fflush(nil)
            throw error
        }
    }

    private static func waitingFigures(
        on instances: [ManagerProcess], database: TestDatabase, files: Int, pam: PAMModule?
    ) throws {
        let first = instances[0], second = instances.dropFirst().first
        let approver = try enrol(1, at: first)[0]
        if let second {
            // The approving device talks to the second instance.
            let store = first.directory.file("state0") + "/identity-managers.json"
            let stored = try String(contentsOfFile: store, encoding: .utf8)
            try stored.replacingOccurrences(of: "127.0.0.1:\(first.port)", with: "127.0.0.1:\(second.port)").write(
                toFile: store, atomically: true, encoding: .utf8)
        }
        let admin = { (arguments: [String]) throws in
            let result = try first.admin(arguments)
            guard result.status == 0 else {
                throw TestFailure("xign-manager admin \(arguments.joined(separator: " ")): \(result.stderr)")
            }
        }
        try admin(["accounts", "set-login", "bench0@example.org", "waiting0"])
        for account in 1..<waitingAccounts {
            try admin(["accounts", "add", "waiting\(account)@example.org", "--login-name", "waiting\(account)"])
        }
        // The bench's hosts name no local user: each account may be the hosts' own.
        for account in 0..<waitingAccounts {
            try admin([
                "accounts", "set-local-user", account == 0 ? "bench0@example.org" : "waiting\(account)@example.org",
                "yes",
            ])
        }
        try admin(["accounts", "keep-open-host-access"])
        let host = try joinedHost("bench-waiting", at: first, state: first.directory.file("host"))
        let configuration = host.configuration
        let approve = { (pending: PendingLoginConfirmation) throws in
            try approver.approve(pending.confirmationId, code: pending.code)
        }

        // One waiter alone: the baseline.
        var alone: [Double] = []
        for round in 0..<10 {
            let pending = try host.startLoginConfirmation(
                loginName: "waiting0", service: "sshd", remoteHost: "198.51.100.\(round)", tty: nil, command: nil)
            alone.append(try approvalToAnswer(pending, waiters: nil, port: first.port, approve: approve))
        }

        // The same through a real pam_xign in a harness process, as sshd would run it: approval → PAM_SUCCESS.
        let work = first.directory.path
        if let pam { try Bench.run("/usr/bin/cc", ["-O2", "-o", work + "/pam_harness", pam.harnessSource, "-lpam"]) }
        let pamLogins = { () throws -> [Double] in
            guard let pam else { return [] }
            return try Bench.approvalToSuccess(
                module: pam.module, work: work, hostState: configuration.stateDirectory, user: "waiting0", runs: 20,
                approve: { try approver.approve($0, code: $1) })
        }
        let pamAlone = try pamLogins()

        // 10,000 confirmations, 100 per account, each from its own address (the per-source cap).
        let total = waitingAccounts * waitingPerAccount
        let started = DispatchTime.now().uptimeNanoseconds
        let hostConfiguration = configuration
        // 100 pending per account is past where PostgreSQL widens a start's read locks to the whole table
        // (docs/design.md), so some starts are answered busy; they are sent again, as a user would, and counted.
        let busy = Atomic<Int>(0)
        let pending = try onThreads(8) { part in
            let host = try XignSdk(configuration: hostConfiguration, localUser: "root")
            return try stride(from: part, to: total, by: 8).map { index in
                for attempt in 1... {
                    do {
                        return (
                            index,
                            try host.startLoginConfirmation(
                                loginName: "waiting\(index % waitingAccounts)", service: "sshd",
                                remoteHost: "10.0.\(index / 250).\(index % 250 + 1)", tty: nil, command: nil)
                        )
                    } catch let error as XignSdkError where error.errorCode == .timeout && attempt < 5 {
                        busy.add(1, ordering: .relaxed)
                    }
                }
                preconditionFailure()
            }
        }.flatMap { $0 }.sorted { $0.0 < $1.0 }.map(\.1)
        let startSeconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        let byInstance = Dictionary(grouping: pending.indices, by: { $0 % instances.count })
        let waiters = try instances.indices.map { instance in
            try WaitingHosts(
                port: instances[instance].port,
                confirmations: (byInstance[instance] ?? []).map { (pending[$0].confirmationId, pending[$0].waitToken) },
                waitMilliseconds: waitMilliseconds)
        }
        defer { waiters.forEach { $0.stop() } }
        // Past one whole wait, so every host is in its second long poll before the window opens.
        Thread.sleep(forTimeInterval: Double(waitMilliseconds) / 1000 + 2)
        let server = server(instances, database: database)
        let statementsBefore = try instances.map(statements).reduce(0, +)
        let cpuBefore = server().map(cpuSeconds).reduce(0, +)
        let answersBefore = waiters.map { $0.answers.load(ordering: .relaxed) }.reduce(0, +)
        Thread.sleep(forTimeInterval: waitingWindow)
        let statementsSpent = try instances.map(statements).reduce(0, +) - statementsBefore
        let cpuSpent = server().map(cpuSeconds).reduce(0, +) - cpuBefore
        let answers = waiters.map { $0.answers.load(ordering: .relaxed) }.reduce(0, +) - answersBefore
        let rssMiB = Double(instances.map { rss($0.pid) }.reduce(0, +)) / 1024

        // Approvals with them all waiting: account 0's confirmations, one after another.
        var crowded: [Double] = []
        for index in stride(from: 0, to: 20 * waitingAccounts, by: waitingAccounts) {
            crowded.append(
                try approvalToAnswer(
                    pending[index], waiters: waiters[index % instances.count], port: 0, approve: approve))
        }
        let pamCrowded = try pamLogins()
        let failures = waiters.flatMap { $0.failures.withLock { $0 } }
        let name = database == .sqlite ? "SQLite, one instance" : "PostgreSQL, two instances"
        print(
            "\n10,000 hosts waiting for an approval (\(name); file limit \(files)\(files < 65536 ? ", this machine's hard limit, below the unit's 65536" : ", the unit's"); each host long-polls \(waitMilliseconds) ms at a time)"
        )
        print(
            String(
                format:
                    "  started %d confirmations in %.1f s (%.0f /s, 8 threads of one host; %d answered busy and sent again)",
                total,
                startSeconds, Double(total) / startSeconds, busy.load(ordering: .relaxed)))
        print(
            String(
                format:
                    "  over %.0f s while nothing was decided: %.1f database statements/s, %.0f wait answers/s, manager CPU %.1f %% of a core%@, RSS %.1f MiB",
                waitingWindow, Double(statementsSpent) / waitingWindow, Double(answers) / waitingWindow,
                cpuSpent / waitingWindow * 100,
                database == .postgreSQL ? " (with PostgreSQL's)" : "", rssMiB))
        let baseline = Bench.Figure(name: "approval → the waiting host's answer, one waiting", milliseconds: alone)
        Bench.table(
            "From the approval (its first request, PIN check included) to the waiting host's signed answer (\(name))",
            [
                baseline,
                Bench.Figure(name: "approval → the waiting host's answer, 10,000 waiting", milliseconds: crowded),
            ], floor: baseline)
        if pam != nil {
            let pamBaseline = Bench.Figure(
                name: "approval → PAM_SUCCESS of pam_xign, one waiting", milliseconds: pamAlone)
            Bench.table(
                "From the approval to PAM_SUCCESS of a real pam_xign in a host process (\(name))",
                [
                    pamBaseline,
                    Bench.Figure(name: "approval → PAM_SUCCESS of pam_xign, 10,000 waiting", milliseconds: pamCrowded),
                ],
                floor: pamBaseline)
        }
        print("  connections dropped or refused: \(failures.count)\(failures.first.map { " (first: \($0))" } ?? "")")
        fflush(nil)
    }

    /// Milliseconds from the user's approval (its first request) to the decision reaching the host that waits for `pending`: a waiter of
    /// its own when `waiters` is nil, else the one among `waiters`.
    private static func approvalToAnswer(
        _ pending: PendingLoginConfirmation, waiters: WaitingHosts?, port: Int,
        approve: (PendingLoginConfirmation) throws -> Void
    ) throws -> Double {
        let own =
            waiters == nil
            ? try WaitingHosts(
                port: port, confirmations: [(pending.confirmationId, pending.waitToken)],
                waitMilliseconds: waitMilliseconds) : nil
        defer { own?.stop() }
        guard let watching = waiters ?? own else { preconditionFailure() }
        if own != nil { Thread.sleep(forTimeInterval: 0.2) }
        let approved = DispatchTime.now().uptimeNanoseconds
        try approve(pending)
        let deadline = Date().addingTimeInterval(15)
        while watching.decision(of: pending.confirmationId) == nil, Date() < deadline { usleep(200) }
        guard let decision = watching.decision(of: pending.confirmationId), decision.state == "approved" else {
            throw TestFailure("the waiting host did not hear of the approval within 15 s")
        }
        return Double(Int64(decision.at) - Int64(approved)) / 1_000_000
    }

    /// The statements the manager has sent its database (its /metrics).
    static func statements(_ manager: ManagerProcess) throws -> Double {
        try manager.metric("xign_database_statements_total")
    }
}
