import Foundation
import NIOConcurrencyHelpers
import Testing
import XignCrypto
import XignProtocol
import XignTestSupport

/// A manager killed with SIGKILL in the middle of a load: whatever a client was told happened is in the database
/// after a restart, nothing is half-written, and the work goes on.
@Suite(.machineShare) struct CrashSafetyTests {
    /// What the clients were told before the crash.
    final class Record: Sendable {
        let registered = NIOLockedValueBox<[String]>([])
        let charges = NIOLockedValueBox<[String: Int]>([:])
        let sent = NIOLockedValueBox<[String: Int]>([:])
        /// Failures of calls that should have worked: before the kill, or to an instance that was not killed.
        let unexpectedFailures = NIOLockedValueBox<[String]>([])
        let killed = NIOLockedValueBox(false)
    }

    /// Registrations and wrong PINs from 6 clients for `seconds`; `victim` is killed halfway. Clients of the
    /// instance that dies stop at their first failed call; those of a surviving instance must never fail.
    func load(
        _ apis: [API<ManagerProcess>], devices: [(id: String, key: P256PrivateKey)], killing victim: ManagerProcess,
        after seconds: Double, record: Record
    ) async throws {
        let stop = Date().addingTimeInterval(seconds * 2)
        let killedOnce = DispatchSemaphore(value: 0)
        let killer = Thread {
            Thread.sleep(forTimeInterval: seconds)
            record.killed.withLockedValue { $0 = true }
            victim.kill()
            killedOnce.signal()
        }
        killer.start()
        defer { killedOnce.wait() }
        _ = try await inParallel(6) { client in
            let api = apis[client % apis.count]
            let survives = api.manager !== victim
            var round = 0
            while Date() < stop {
                round += 1
                do {
                    if client < 2 {
                        let email = "crash\(client)-\(round)@example.org"
                        let answer = try await api.postRegistration(email)
                        if answer.status == 201 { record.registered.withLockedValue { $0.append(email) } }
                    } else {
                        let device = devices[client - 2]
                        record.sent.withLockedValue { $0[device.id, default: 0] += 1 }
                        let answer = try await api.authenticate(device, pin: "13579")
                        let outcome =
                            try answer.signedPayload(key: api.managerKey, type: SignedAnswerType.authenticationResult)[
                                "outcome"] as? String
                        if outcome == "lockout" { record.charges.withLockedValue { $0[device.id, default: 0] += 1 } }
                    }
                } catch {
                    if survives || !record.killed.withLockedValue({ $0 }) {
                        record.unexpectedFailures.withLockedValue { $0.append("\(error)") }
                    }
                    if !survives { return }
                }
                if client >= 2 && round >= 18 { return }  // stay below the free attempts: every guess is checked
            }
        }
    }

    /// `mailboxes`: the instances whose maildirs may hold the mail (it goes to the one that delivered it).
    func check(
        _ manager: ManagerProcess, _ record: Record, devices: [(id: String, key: P256PrivateKey)],
        mailboxes: [ManagerProcess]
    ) throws {
        let unexpected = record.unexpectedFailures.withLockedValue { $0 }
        #expect(unexpected.isEmpty, "\(unexpected.prefix(3))")
        let accounts = Set(try manager.query("SELECT email FROM accounts"))
        let registered = record.registered.withLockedValue { $0 }
        #expect(!registered.isEmpty)
        #expect(registered.filter { !accounts.contains($0) }.isEmpty, "every 201 has its account")
        #expect(
            try manager.query(
                "SELECT COUNT(*) FROM accounts c WHERE NOT EXISTS (SELECT 1 FROM activations a WHERE a.account_id = c.id)"
            ) == ["0"])
        #expect(
            try manager.query(
                "SELECT COUNT(*) FROM authentications WHERE code_expires_at IS NOT NULL AND (role IS NULL OR attributes IS NULL)"
            ) == [
                "0"
            ])
        for device in devices {
            let counted =
                Int(
                    try manager.query(
                        "SELECT a.failed_attempts FROM activations a JOIN devices d ON d.activation_id = a.id WHERE d.id = '\(device.id)'"
                    ).first ?? "") ?? -1
            let answered = record.charges.withLockedValue { $0[device.id] ?? 0 },
                sent = record.sent.withLockedValue { $0[device.id] ?? 0 }
            #expect(
                counted >= answered && counted <= sent, "\(answered) charges answered, \(sent) sent, \(counted) counted"
            )
        }
        if manager.database == .sqlite {
            #expect(try manager.query("PRAGMA integrity_check") == ["ok"])
        }
        // Mail of every account is delivered, even that of a registration committed just before the kill.
        #expect(try waitUntil(seconds: 40) { try manager.query("SELECT COUNT(*) FROM mail_queue") == ["0"] })
        for email in registered {
            #expect(mailboxes.contains { (try? $0.mailPath(for: email)) != nil }, "mail to \(email)")
        }
    }

    static let config = ManagerProcess.testConfig(firstLock: "300ms", maxAttempts: 50, freeAttempts: 20)

    @Test func sqliteKeepsEveryAnsweredChargeAndRegistrationThroughAKill() async throws {
        let manager = try ManagerProcess(config: Self.config)
        let api = API(manager: manager)
        let devices = try await api.enrolDevices("victim", count: 4)
        let record = Record()
        try await load([api], devices: devices, killing: manager, after: 1.0, record: record)
        try manager.start()
        try check(manager, record, devices: devices, mailboxes: [manager])
        #expect(try await api.authenticate(devices[0], pin: "24680").status == 200, "logins go on")
    }

    @Test func postgreSQLKeepsServingFromTheOtherInstanceWhileOneIsKilled() async throws {
        let first = try ManagerProcess(config: Self.config, database: .postgreSQL)
        let second = try ManagerProcess(sharingDatabaseWith: first)
        let apis = [API(manager: first), API(manager: second)]
        let devices = try await apis[0].enrolDevices("victim", count: 4)
        let record = Record()
        try await load(apis, devices: devices, killing: first, after: 1.0, record: record)
        try first.start()
        try check(second, record, devices: devices, mailboxes: [first, second])
        // Logins go on through both, for every device: a claim the killed instance left was charged when it restarted,
        // so no activation waits for it to run out.
        for (index, device) in devices.enumerated() {
            let api = apis[index % 2]
            #expect(try await api.authenticate(device, pin: "24680").status == 200)
        }
    }

    @Test(arguments: TestDatabase.allCases) func aRestartedInstanceChargesTheClaimsItLeft(
        database: TestDatabase
    ) async throws {
        let manager = try ManagerProcess(config: Self.config, database: database)
        let api = API(manager: manager)
        let devices = try await api.enrolDevices("claimed", count: 2)
        manager.stop()
        // As a kill in the middle of two PIN checks leaves them: one claimed by this instance, one by another.
        let instance = try manager.instanceId
        let until = Int64(Date().timeIntervalSince1970 * 1000) + 30_000
        for (device, owner) in zip(devices, [instance, "another-instance"]) {
            _ = try manager.query(
                "UPDATE activations SET pin_check_until = \(until), pin_check_by = '\(owner)' WHERE device_id = '\(device.id)'"
            )
        }
        try manager.start()
        /// The activation's failures and whether a claim still holds it.
        func state(_ device: (id: String, key: P256PrivateKey)) throws -> (failures: String, claimed: Bool) {
            let fields =
                try manager.query(
                    "SELECT failed_attempts, pin_check_until FROM activations WHERE device_id = '\(device.id)'"
                ).first?.split(
                    separator: "|") ?? []
            return (fields.first.map(String.init) ?? "?", fields.last != "0")
        }
        #expect(try state(devices[0]) == ("1", false), "its own claim was charged at start and released")
        // On SQLite one process checks PINs, so every claim was its own; with PostgreSQL another instance's claim stands.
        #expect(try state(devices[1]) == (database == .sqlite ? ("1", false) : ("0", true)))
        #expect(try await api.authenticate(devices[0], pin: "24680").status == 200, "no wait for the claim to run out")
    }

    /// A verdict that could not commit (the database went away mid-check, as in a failover) leaves this instance's
    /// claim: its next check of that activation charges it at once, as the guess it may have been, while another
    /// instance's live claim is waited for (the control).
    @Test(arguments: TestDatabase.allCases) func aClaimThisInstanceLeftIsChargedAtItsNextCheckWithoutWaiting(
        database: TestDatabase
    ) async throws {
        let manager = try ManagerProcess(config: Self.config, database: database)
        let api = API(manager: manager)
        let devices = try await api.enrolDevices("left", count: 2)
        let instance = try manager.instanceId
        for (device, (owner, waits)) in zip(devices, [(instance, false), ("another-instance", true)]) {
            // Set just before the check, so a loaded machine cannot let the other instance's claim run out first.
            let until = Int64(Date().timeIntervalSince1970 * 1000) + (waits ? 3_000 : 30_000)
            _ = try manager.query(
                "UPDATE activations SET pin_check_until = \(until), pin_check_by = '\(owner)' WHERE device_id = '\(device.id)'"
            )
            let started = Date()
            let answer = try await api.authenticate(device, pin: "13579")
            let lock =
                try answer.signedPayload(key: try api.managerKey, type: SignedAnswerType.authenticationResult)[
                    "lockout"] as? [String: Any]
            #expect(lock?["failedAttempts"] as? Int == 2, "the claim charged, then this wrong PIN: \(answer.json)")
            #expect((Date().timeIntervalSince(started) > 2) == waits, "\(device.id) waited for the claim: \(waits)")
        }
    }

    /// On SQLite a login waits for the disk once, at the PIN's verdict: the spent challenge and the claim before it are
    /// written unsynced and reach the disk with that commit, and nothing is answered before it. A claim that must first
    /// charge a check a crash cut off waits for the disk itself, as every charge does (the control: one more). On
    /// PostgreSQL, where unsynced commits cost more than they save, all three are synced, and the charge adds none.
    @Test(arguments: TestDatabase.allCases) func aLoginWaitsForTheDiskOnceUnlessItChargesACutOffCheck(
        database: TestDatabase
    ) async throws {
        let manager = try ManagerProcess(
            config: Self.config + "\n[metrics]\nlisten = 127.0.0.1:0\n", database: database)
        let api = API(manager: manager)
        let device = try await api.enrolDevice("synced@example.org")
        let syncedCommits = { try manager.metric("xign_database_synced_commits_total") }

        var before = try syncedCommits()
        #expect(try await api.authenticate(device, pin: "24680").status == 200)
        let once = try syncedCommits() - before
        #expect(once == (database == .sqlite ? 1 : 3), "on SQLite only the verdict, with the login's record")

        // A claim left by a manager killed mid-check, run out.
        let past = Int64(Date().timeIntervalSince1970 * 1000) - 1_000
        _ = try manager.query("UPDATE activations SET pin_check_until = \(past) WHERE device_id = '\(device.id)'")
        before = try syncedCommits()
        #expect(try await api.authenticate(device, pin: "24680").status == 200)
        let twice = try syncedCommits() - before
        #expect(twice == (database == .sqlite ? 2 : 3), "on SQLite the charge, then the verdict")
        #expect(manager.log.contains("a PIN check ran out without a result; counted as a failure"))
    }

    /// A login's record commits with its PIN's verdict. When that record cannot be written (here a trigger refuses it,
    /// as a full disk would), the login fails and writes nothing of it, and the right PIN is not charged: the claim
    /// is released, not left for the next check to count as a guess. The control: without the trigger it logs in.
    @Test(arguments: TestDatabase.allCases) func aLoginWhoseRecordCannotBeWrittenChargesNothing(
        database: TestDatabase
    ) async throws {
        let manager = try ManagerProcess(config: Self.config, database: database)
        let api = API(manager: manager)
        let device = try await api.enrolDevice("full-disk@example.org")
        let refuse =
            database == .sqlite
            ? "CREATE TRIGGER no_space BEFORE UPDATE OF code ON authentications WHEN NEW.code IS NOT NULL BEGIN SELECT RAISE(ABORT, 'no space left'); END"
            : """
            CREATE FUNCTION no_space() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'no space left'; END $$ LANGUAGE plpgsql;
            CREATE TRIGGER no_space BEFORE UPDATE OF code ON authentications FOR EACH ROW WHEN (NEW.code IS NOT NULL) EXECUTE FUNCTION no_space()
            """
        _ = try manager.query(refuse)
        let refused = try await api.authenticate(device, pin: "24680")
        #expect(refused.status == 500)
        let state = {
            try manager.query(
                "SELECT failed_attempts, pin_check_until FROM activations WHERE device_id = '\(device.id)'")
        }
        #expect(try state() == ["0|0"], "not charged, and the claim released")
        #expect(try manager.query("SELECT count(*) FROM authentications WHERE code IS NOT NULL") == ["0"])

        _ = try manager.query("DROP TRIGGER no_space" + (database == .sqlite ? "" : " ON authentications"))
        #expect(try await api.authenticate(device, pin: "24680").status == 200)
        #expect(try state() == ["0|0"])
        #expect(try manager.query("SELECT count(*) FROM authentications WHERE code IS NOT NULL") == ["1"])
    }
}
