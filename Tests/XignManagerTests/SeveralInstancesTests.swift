import Foundation
import Testing
import XignCrypto
import XignProtocol
import XignTestSupport

@testable import XignManager

/// Two manager instances on one PostgreSQL database, as behind a load balancer: every piece of state a request
/// needs is a row, so any instance answers any step, and the lockout counts every guess whichever instance took it.
@Suite(.machineShare) struct SeveralInstancesTests {
    /// No delay for the first 20 failures, so every parallel guess is checked and must be counted.
    static let countingConfig = ManagerProcess.testConfig(firstLock: "300ms", maxAttempts: 50, freeAttempts: 20)

    @Test func aChallengeIssuedByOneInstanceIsFinishedByTheOtherAndThenRefusedAsReplayed() async throws {
        let first = try ManagerProcess(database: .postgreSQL)
        let second = try ManagerProcess(sharingDatabaseWith: first)
        let (a, b) = (API(manager: first), API(manager: second))
        #expect(try a.managerKey.fingerprint == (try b.managerKey.fingerprint))
        let device = try await a.enrolDevice("both@example.org")

        let started = try await a.startAuthentication(device)
        let finished = try await b.finishAuthentication(started, pin: "24680", signer: device.key)
        let login = try #require(
            try finished.signedPayload(key: b.managerKey, type: SignedAnswerType.authenticationResult)["serviceLogin"]
                as? [String: Any])
        let replay = try await a.finishAuthentication(started, pin: "24680", signer: device.key)
        #expect(replay.status == 409, "the challenge B consumed is gone for A too")
        let code = try #require(login["authorizationCode"] as? String)
        #expect(try await a.post(APIPath.token, TokenRequest(authorizationCode: code, nonce: "t")).status == 200)
        #expect(
            try await b.post(APIPath.token, TokenRequest(authorizationCode: code, nonce: "t")).errorCode
                == "challengeInvalid"
        )
    }

    @Test func parallelWrongPINsOverBothInstancesAreAllCountedAndRightOnesAllPass() async throws {
        let first = try ManagerProcess(config: Self.countingConfig, database: .postgreSQL)
        let second = try ManagerProcess(sharingDatabaseWith: first)
        let apis = [API(manager: first), API(manager: second)]
        let device = try await apis[0].enrolDevice("parallel@example.org")

        let checked = try await inParallel(20) { attempt in
            let api = apis[attempt % 2]
            let answer = try await api.authenticate(device, pin: "1357\(attempt % 10)")
            return try answer.signedPayload(key: api.managerKey, type: SignedAnswerType.authenticationResult)["outcome"]
                as? String == "lockout"
        }.filter { $0 }.count
        #expect(checked == 20, "every guess was checked and answered")
        #expect(try first.query("SELECT failed_attempts FROM activations") == ["20"], "and every one was counted")

        // Eight right PINs at once over both instances: all pass, none is refused by another's claim.
        let passed = try await inParallel(8) { attempt in
            let api = apis[attempt % 2]
            let answer = try await api.authenticate(device, pin: "24680")
            return try answer.signedPayload(key: api.managerKey, type: SignedAnswerType.authenticationResult)[
                "serviceLogin"] != nil
        }.filter { $0 }.count
        #expect(passed == 8)
        #expect(try first.query("SELECT failed_attempts FROM activations") == ["0"])
    }

    @Test func withTheLockInForceParallelGuessesAreCountedOrRefusedNeverLost() async throws {
        let first = try ManagerProcess(database: .postgreSQL)
        let second = try ManagerProcess(sharingDatabaseWith: first)
        let apis = [API(manager: first), API(manager: second)]
        let device = try await apis[0].enrolDevice("locked@example.org")
        // Started before the storm, so each guess is one finish and none of them meets a lock at its start.
        var started: [[[String: String]]] = []
        for api in apis {
            var starts: [[String: String]] = []
            for _ in 0..<10 {
                starts.append(try await api.startAuthentication(device).compactMapValues { $0 as? String })
            }
            started.append(starts)
        }
        let outcomes = try await inParallel(20) { [started] attempt in
            try await apis[attempt % 2].finishAuthentication(
                started[attempt % 2][attempt / 2], pin: "13579", signer: device.key
            ).status
        }.reduce(into: [Int: Int]()) { $0[$1, default: 0] += 1 }
        // A checked guess is answered 200 (outcome lockout); one that met the lock is refused with 423 before its PIN is read.
        let checked = outcomes[200] ?? 0
        #expect(checked + (outcomes[423] ?? 0) == 20, "\(outcomes)")
        #expect(checked >= 1)
        #expect(
            try first.query("SELECT failed_attempts FROM activations") == ["\(checked)"],
            "the counter says how many ran")
    }

    /// A transaction that loses to concurrent ones on every attempt (a trigger raises PostgreSQL's serialization
    /// failure) is answered busy with what to do, keeps nothing, and says so in the log; without the trigger the same
    /// start goes through.
    @Test func aRequestThatLosesEveryConflictIsAnsweredBusyAndKeepsNothing() async throws {
        let manager = try ManagerProcess(database: .postgreSQL)
        let api = API(manager: manager)
        let device = try await api.enrolDevice("conflicts@example.org")
        _ = try manager.query(
            """
            CREATE FUNCTION always_conflicts() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = '40001'; END $$ LANGUAGE plpgsql;
            CREATE TRIGGER always_conflicts BEFORE INSERT ON authentications FOR EACH ROW EXECUTE FUNCTION always_conflicts()
            """)
        let busy = try await api.postStart(device)
        #expect(busy.status == 503 && busy.errorCode == "busy", "\(busy.status) \(busy.json)")
        #expect((busy.error["message"] as? String ?? "").contains("try again in a moment"), "\(busy.json)")
        #expect(try manager.query("SELECT COUNT(*) FROM authentications") == ["0"])
        #expect(manager.log.contains("serialization conflict \(PostgreSQLPool.maximumAttempts) times in a row"))
        _ = try manager.query("DROP TRIGGER always_conflicts ON authentications")
        #expect(try await api.postStart(device).status == 200)
        #expect(try manager.query("SELECT COUNT(*) FROM authentications") == ["1"])
    }

    @Test func mailQueuedOnEitherInstanceIsSentOnce() async throws {
        let sink = try SMTPSink()
        let config = ManagerProcess.testConfig + "\n[mail]\nsmtp_relay = 127.0.0.1:\(sink.port)\n"
        let first = try ManagerProcess(config: config, database: .postgreSQL)
        let second = try ManagerProcess(sharingDatabaseWith: first)
        let apis = [API(manager: first), API(manager: second)]
        _ = try await inParallel(12) { index in
            let answer = try await apis[index % 2].postRegistration("once\(index)@example.org")
            guard answer.status == 201 else { throw TestFailure("registration \(index): \(answer.json)") }
        }
        #expect(waitUntil { sink.messages.count >= 12 })
        try await Task.sleep(for: .seconds(1.5))  // both relay loops had time to send a second copy, if they would
        #expect(sink.messages.map(\.recipient).sorted() == (0..<12).map { "once\($0)@example.org" }.sorted())
        #expect(try first.query("SELECT COUNT(*) FROM mail_queue") == ["0"])
    }

    @Test func instancesThatStartTogetherOnANewDatabaseMigrateItOnce() async throws {
        let directory = TemporaryDirectory()
        // The keys exist first (as an admin distributes them); then four processes open the empty database at once.
        let keys = try ManagerProcess(directory: directory)
        keys.stop()
        let storage = try PostgreSQLServer.shared().makeDatabase()
        let config = try directory.write("postgresql.conf", ManagerProcess.testConfig + "\n" + storage.config + "\n")
        let openers = try (0..<4).map { _ in
            try ChildProcess(
                try Products.path("xign-manager"),
                ["admin", "activations", "--config", config, "--data-dir", keys.dataDirectory], in: directory)
        }
        for opener in openers {
            let result = try opener.wait()
            #expect(result.status == 0, "\(result.stderr)")
        }
        #expect(
            try PostgreSQLServer.shared().query("SELECT version FROM schema_version", database: storage.name)
                == "\(Schema.version)")
    }

    @Test func anInstanceWithAnotherKeyIsRefusedBeforeItAnswers() async throws {
        let first = try ManagerProcess(database: .postgreSQL)
        let directory = TemporaryDirectory()
        let config = try directory.write("manager.conf", try String(contentsOfFile: first.configPath, encoding: .utf8))
        // Its own fresh data directory: it would make a new signing key and pepper, which the database does not know.
        let result = try ChildProcess(
            try Products.path("xign-manager"),
            ["serve", "--config", config, "--data-dir", directory.file("data"), "--listen", "127.0.0.1:0"],
            in: directory
        ).wait(timeout: 30)
        #expect(result.status != 0)
        #expect(result.stderr.contains("copy signing-key.pem, pin-sealing-key.pem and pin-pepper"), "\(result.stderr)")
        // The signing key and the pepper copied, but a PIN-sealing key of its own: refused too, and the message names it.
        let data = directory.file("copied")
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        for file in ["signing-key.pem", "pin-pepper"] {
            try FileManager.default.copyItem(atPath: first.dataDirectory + "/" + file, toPath: data + "/" + file)
        }
        try writeTestFile(
            data + "/pin-sealing-key.pem", Data(try P256PrivateKey().pemRepresentation().utf8), mode: 0o600)
        let other = try ChildProcess(
            try Products.path("xign-manager"),
            ["serve", "--config", config, "--data-dir", data, "--listen", "127.0.0.1:0"], in: directory
        ).wait(timeout: 30)
        #expect(other.status != 0)
        #expect(other.stderr.contains("is not the PIN-sealing key this database was set up with"), "\(other.stderr)")
    }
}
