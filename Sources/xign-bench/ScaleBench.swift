import Foundation
import XignCore
import XignHarness
import XignLogin
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// `make bench-scale`: the manager on PostgreSQL with 1,000 and with 1,000,000 accounts (each with its activation and
/// device) and a tenth as many joined hosts in groups, in one run: what a login, a host's confirmation, a
/// registration, the administrator's lists, /metrics and the database's size cost at each size.
enum ScaleBench {
    struct Sizes {
        var figures: [String: Bench.Figure] = [:]
        var databaseBytes = 0
        var fillSeconds = 0.0
    }

    static func run(accounts large: Int) throws {
        // An error thrown out of main ends the process without flushing what was printed.
        do { try figures(accounts: large) } catch {
            fflush(nil)
            throw error
        }
    }

    static func figures(accounts large: Int) throws {
        print(
            "xign bench-scale: PostgreSQL 15 (durable defaults), the manager at its defaults, \(ProcessInfo.processInfo.activeProcessorCount) cores"
        )
        _ = try PostgreSQLServer.shared(durable: true)
        let small = try measure(accounts: 1_000, peak: false)
        let big = try measure(accounts: large, peak: true)
        print(
            "\nfigure (median / p99 ms)                     1,000 accounts        \(large.formatted()) accounts     ratio of medians"
        )
        for name in small.figures.keys.sorted() {
            guard let a = small.figures[name], let b = big.figures[name] else { continue }
            print(
                name.padding(toLength: 44, withPad: " ", startingAt: 0)
                    + String(
                        format: "%8.2f / %8.2f   %9.2f / %9.2f   %6.2f×", a.median, a.percentile(0.99), b.median,
                        b.percentile(0.99), b.median / a.median))
        }
        print(
            String(
                format: "database size: %.1f MiB at 1,000, %.1f MiB at %@ (%.0f bytes per account); filled in %.1f s",
                Double(small.databaseBytes) / 1_048_576, Double(big.databaseBytes) / 1_048_576, large.formatted(),
                Double(big.databaseBytes - small.databaseBytes) / Double(large - 1_000), big.fillSeconds))
    }

    static func measure(accounts: Int, peak withPeak: Bool) throws -> Sizes {
        let manager = try ManagerProcess(config: ManagerBench.config, database: .postgreSQL)
        defer { manager.stop() }
        let clients = try ManagerBench.enrol(2, at: manager)
        let host = try ManagerBench.joinedHost("scale-host", at: manager, state: manager.directory.file("host"))
        for arguments in [
            ["accounts", "set-login", "bench1@example.org", "scale1"], ["accounts", "keep-open-host-access"],
            // Its copies too: the bench's hosts name no local user.
            ["accounts", "set-local-user", "bench1@example.org", "yes"],
        ] {
            guard try manager.admin(arguments).status == 0 else { throw TestFailure("admin \(arguments)") }
        }
        var sizes = Sizes()
        let started = Date()
        try fill(manager, accounts: accounts)
        sizes.fillSeconds = Date().timeIntervalSince(started)
        print(
            "\n\(accounts.formatted()) accounts, \((accounts / 10).formatted()) hosts: filled in \(String(format: "%.1f", sizes.fillSeconds)) s"
        )

        let metrics = try ManagerURL("http://127.0.0.1:\(try manager.metricsPort())")
        let http = HTTPClient()
        var registrations = 0
        func list(_ arguments: [String]) throws {
            let listed = try manager.admin(arguments)
            guard listed.status == 0, !listed.stdout.isEmpty else {
                throw TestFailure("admin \(arguments): \(listed.stderr)")
            }
        }
        let figures = [
            try Bench.measure("a login (challenge, start, finish)", runs: 200) { _ in try clients[0].login() },
            try Bench.measure("a host's confirmation (start, approve)", runs: 50) { run in
                let pending = try host.startLoginConfirmation(
                    loginName: "scale1", service: "sshd", remoteHost: "198.51.100.\(run % 250 + 1)", tty: nil,
                    command: nil)
                try clients[1].approve(pending.confirmationId, code: pending.code)
            },
            try Bench.measure("a registration (validate, hash, mail)", runs: 30) { _ in
                registrations += 1
                let parameters = try clients[0].sdk.registry.initializationSynchronous(url: manager.url)
                parameters.pinSpec.setPin(ManagerBench.pin)
                parameters.selection?.info.email?.setValue(value: "new\(registrations)@example.org")
                _ = try clients[0].sdk.registry.registerSynchronous(data: parameters)
            },
            try Bench.measure("GET /metrics", runs: 50) { _ in _ = try http.send("GET", to: metrics, path: "/metrics")
            },
            try Bench.measure("admin: one account's activations", runs: 10) { _ in
                _ = try manager.admin(["activations", "--email", "scale\(accounts / 2)@example.org"])
            },
            try Bench.measure("admin: audit of one account", runs: 10) { _ in
                _ = try manager.admin(["audit", "--email", "bench0@example.org"])
            },
            try Bench.measure("admin: accounts list, first page (1,000)", runs: 10) { _ in
                try list(["accounts", "list"])
            },
            try Bench.measure("admin: accounts list, a page mid-way", runs: 10) { _ in
                try list(["accounts", "list", "--after", "scale\(accounts / 2)@example.org"])
            },
            try Bench.measure("admin: hosts list, a page mid-way", runs: 10) { _ in
                try list(["hosts", "list", "--after", "host\(accounts / 20).example.org"])
            },
        ]
        for figure in figures { sizes.figures[figure.name] = figure }
        sizes.databaseBytes = try manager.databaseSize()
        if withPeak { try peak(manager, hostState: manager.directory.file("host")) }
        return sizes
    }

    /// `accounts` copies of an enrolled account (its activation and device), a tenth as many joined hosts with a
    /// group each, made inside PostgreSQL (generate_series, no row crosses the wire), then ANALYZE.
    static func fill(_ manager: ManagerProcess, accounts: Int) throws {
        let server = try PostgreSQLServer.shared()
        let database = manager.postgreSQLDatabase ?? ""
        func copy(_ table: String, from row: String, count: Int, _ overrides: [String: String]) throws {
            let columns = try server.query(
                "SELECT string_agg(column_name, ',' ORDER BY ordinal_position) FROM information_schema.columns WHERE table_name = '\(table)'",
                database: database
            ).split(separator: ",").map(String.init)
            let values = columns.map { overrides[$0] ?? "t.\($0)" }.joined(separator: ", ")
            try server.query(
                "INSERT INTO \(table) (\(columns.joined(separator: ", "))) SELECT \(values) FROM \(table) t, generate_series(1, \(count)) g WHERE \(row)",
                database: database)
        }
        let seed = "t.email = 'bench0@example.org'"
        try copy(
            "accounts", from: seed, count: accounts,
            [
                "id": "'scale-a-' || g", "email": "'scale' || g || '@example.org'", "login_name": "'scale-' || g",
                "uid": "200000 + g", "role": "NULL",
            ])
        try copy(
            "activations", from: "t.account_id = (SELECT id FROM accounts WHERE email = 'bench0@example.org')",
            count: accounts,
            ["id": "'scale-act-' || g", "account_id": "'scale-a-' || g", "device_id": "'scale-d-' || g"])
        try copy(
            "devices",
            from:
                "t.id = (SELECT device_id FROM activations WHERE account_id = (SELECT id FROM accounts WHERE email = 'bench0@example.org'))",
            count: accounts, ["id": "'scale-d-' || g", "activation_id": "'scale-act-' || g", "credential_id": "NULL"])
        try copy(
            "hosts", from: "t.name = 'scale-host'", count: accounts / 10,
            ["id": "'scale-h-' || g", "name": "'host' || g || '.example.org'"])
        try server.query(
            "INSERT INTO host_groups (host_name, group_name) SELECT 'host' || g || '.example.org', 'group' || (g % 100) FROM generate_series(1, \(accounts / 10)) g",
            database: database)
        try server.query(
            "INSERT INTO account_host_groups (account_id, group_name) SELECT 'scale-a-' || g, 'group' || (g % 100) FROM generate_series(1, \(accounts)) g",
            database: database)
        // The bench's own host serves every group, so any account may log in there.
        try server.query(
            "INSERT INTO host_groups (host_name, group_name) SELECT 'scale-host', 'group' || g FROM generate_series(0, 99) g",
            database: database)
        try server.query("ANALYZE", database: database)
    }
}
