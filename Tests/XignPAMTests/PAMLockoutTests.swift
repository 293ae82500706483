import Foundation
import Testing
import XignCore
import XignProtocol
import XignTestSupport

/// The lockout as people meet it: parallel logins, a clock that is off, and a lock someone else tries to plant.
@Suite struct PAMLockoutTests {
    /// The first failure locks for a minute, so a lock cannot run out while a test looks at it.
    static let minuteLocks = ManagerProcess.testConfig(firstLock: "60s", longestLock: "1h")

    /// Runs `count` logins at once, each in its own harness process, and returns them in start order.
    func parallelLogins(
        _ fixture: PAMFixture, users: [String] = ["alice"], count: Int, answers: @escaping @Sendable (Int) -> [String]
    ) -> [Result<PAMFixture.Login, any Error>] {
        let results = LoginResults(count: count)
        DispatchQueue.concurrentPerform(iterations: count) { index in
            // Whether a login is asked for its PIN or refused by a lock another one just set is the race itself.
            results.set(
                index,
                Result {
                    try fixture.login(users[index % users.count], answers: answers(index), unusedAnswersAllowed: true)
                })
        }
        return results.values
    }

    func codes(_ logins: [Result<PAMFixture.Login, any Error>]) throws -> [Int] { try logins.map { try $0.get().code } }

    @Test func eightParallelLoginsWithTheRightPINAllSucceed() throws {
        let fixture = try PAMFixture()
        let logins = parallelLogins(fixture, count: 8) { _ in ["24680"] }
        #expect(
            try codes(logins) == Array(repeating: PAMCode.success, count: 8),
            "\(logins.map { (try? $0.get().output) ?? "\($0)" })")
        #expect(try fixture.activation("alice@example.org")["failedAttempts"] as? Int == 0)
    }

    @Test func parallelWrongPINsAreEachCountedWhenNoLockStopsThem() throws {
        // Free attempts: no failure locks, so every guess reaches the PIN check, and each must be charged.
        let fixture = try PAMFixture(
            managerConfig: ManagerProcess.testConfig(firstLock: "300ms", maxAttempts: 30, freeAttempts: 20))
        let codes = try codes(parallelLogins(fixture, count: 20) { _ in ["13570"] })
        #expect(codes == Array(repeating: PAMCode.authError, count: 20))
        #expect(try fixture.activation("alice@example.org")["failedAttempts"] as? Int == 20)
    }

    @Test func parallelWrongPINsAreCountedOrRefusedByTheLockTheFirstOneSet() throws {
        let fixture = try PAMFixture(managerConfig: Self.minuteLocks)
        let codes = try codes(parallelLogins(fixture, count: 20) { _ in ["13570"] })
        #expect(codes.filter { $0 == PAMCode.authError }.count == 1, "exactly one guess was checked: \(codes)")
        #expect(codes.filter { $0 == PAMCode.maxTries }.count == 19, "the others met the lock: \(codes)")
        #expect(try fixture.activation("alice@example.org")["failedAttempts"] as? Int == 1)
    }

    @Test func aWrongPINRacingFourRightOnesChargesExactlyOneFailure() throws {
        let fixture = try PAMFixture(managerConfig: Self.minuteLocks)
        let logins = parallelLogins(fixture, count: 5) { $0 == 2 ? ["13570"] : ["24680"] }
        let codes = try codes(logins)
        #expect(codes[2] == PAMCode.authError)
        // A right PIN either went before the wrong one or met the lock it set; nothing else.
        #expect(
            codes.enumerated().allSatisfy {
                $0.offset == 2 || [PAMCode.success, PAMCode.maxTries].contains($0.element)
            }, "\(codes)")
        #expect(try fixture.activation("alice@example.org")["failedAttempts"] as? Int == 1)
        for login in logins where (try? login.get().code) == PAMCode.maxTries {
            // Refused at start (no prompt) or after its PIN was asked; either way it is told of the lock, not of a wrong PIN.
            let conversation = try login.get().conversation
            #expect(conversation.hasSuffix(try PAMFixture.golden("locked")), "\(conversation)")
            #expect(
                !conversation.contains("Wrong PIN"), "a right PIN refused by the lock is not told its PIN was wrong")
        }
    }

    /// Sets an activation's PIN-check claim, as another manager instance in the middle of a check holds it.
    func setClaim(_ fixture: PAMFixture, email: String, until: Int64) throws {
        let id = try fixture.activation(email)["id"] as? String ?? ""
        let sql =
            "UPDATE activations SET pin_check_until = \(until), pin_check_by = 'another-instance' WHERE id = '\(id)';"
        let result = try ChildProcess(
            "/usr/bin/sqlite3", ["-cmd", ".timeout 5000", fixture.manager.dataDirectory + "/manager.sqlite", sql],
            in: fixture.directory
        ).wait()
        guard result.status == 0 else { throw TestFailure("sqlite3: \(result.stderr)") }
    }

    @Test func aCheckHeldElsewhereMakesTheSameUserWaitAndOthersGoOn() throws {
        let fixture = try PAMFixture(users: ["alice", "bob"])
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        try setClaim(fixture, email: "alice@example.org", until: now + 20_000)
        let alice = Thread.detachedResult { try fixture.login("alice") }
        let bob = try fixture.login("bob")
        #expect(bob.code == PAMCode.success, "another activation's check does not hold this one up: \(bob.output)")
        #expect(!alice.isFinished, "alice waits while the claim is held")
        try setClaim(fixture, email: "alice@example.org", until: 0)
        #expect(
            try alice.value(timeout: 30).code == PAMCode.success,
            "once the other check is over, alice's right PIN logs in")
        #expect(try fixture.activation("alice@example.org")["failedAttempts"] as? Int == 0)
    }

    @Test func aCheckThatRanOutWithoutAResultIsChargedAsAFailure() throws {
        let fixture = try PAMFixture()
        try setClaim(fixture, email: "alice@example.org", until: Int64(Date().timeIntervalSince1970 * 1000) - 1)
        let login = try fixture.login()
        #expect(login.code == PAMCode.maxTries, "the guess that may have been wrong set a lock: \(login.output)")
        #expect(try fixture.activation("alice@example.org")["failedAttempts"] as? Int == 1)
    }

    // MARK: Clocks

    @Test(arguments: ["+4m", "-4m", "+2h", "-1d"]) func aHostClockThatIsOffStillLogsIn(offset: String) throws {
        let fixture = try PAMFixture()
        let login = try fixture.login(wrapper: FakeClock.command(offset))
        #expect(login.code == PAMCode.success, "\(login.output)")
    }

    @Test func aLockIsCountedFromTheManagersAnswerWhateverTheHostClockSays() throws {
        let fixture = try PAMFixture(managerConfig: Self.minuteLocks)
        let wrong = try fixture.login(answers: ["13570"], wrapper: FakeClock.command("-1h"))
        #expect(wrong.code == PAMCode.authError)
        // A host an hour behind would otherwise remember the lock for an hour longer than the manager keeps it.
        let remembered = try pendingLockouts(fixture).values.first?["lockedUntil"] as? Double ?? 0
        let expected = (Date().timeIntervalSince1970 - 3600 + 60) * 1000
        #expect(
            abs(remembered - expected) < 10_000, "the remembered lock ends 60 s after the wrong PIN on the host's clock"
        )
    }

    @Test func aTokenThatExpiredOnItsWayIsRefusedAndOneInTimeIsNot() throws {
        let config = ManagerProcess.testConfig(
            pamService: "roles = login, sudo", "role.login.authenticators = device+pin",
            "role.sudo.authenticators = device+pin", "token_lifetime = 5s")
        let fixture = try PAMFixture(managerConfig: config)
        // Holds the manager's answer that carries the token (the finish's) back past the token's lifetime.
        let slow = try FaultyServer.delaying(5.5, to: fixture.manager.port) {
            $0.hasPrefix("POST \(APIPath.authenticationFinish) ")
        }
        try fixture.redirectEnrolments(to: slow.url)
        try fixture.service("login", arguments: "timeout=10")
        // Four minutes behind: the token's lifetime is the manager's, counted here on the monotonic clock.
        let late = try fixture.login(wrapper: FakeClock.command("-4m"))
        #expect(late.code == PAMCode.authError, "\(late.output)")
        try fixture.redirectEnrolments(to: fixture.manager.url.description, from: slow.url)
        #expect(
            try fixture.login(wrapper: FakeClock.command("-4m")).code == PAMCode.success,
            "the same login in time is accepted")
    }

    // MARK: Planted locks

    func statePath(_ fixture: PAMFixture) -> String { fixture.state + "/identity-managers.json" }

    func pendingLockouts(_ fixture: PAMFixture) throws -> [String: [String: Any]] {
        let contents =
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: statePath(fixture))))
            as? [String: Any]
        return contents?["pendingLockouts"] as? [String: [String: Any]] ?? [:]
    }

    static let plantedLock = FaultyServer.http(
        status: 423,
        body: Array(
            """
            {"error":{"code":"lockedOut","message":"locked","lockout":{"isPermanent":true,"lockedUntil":253402300799000,"failedAttempts":99,"issuedAt":0}}}
            """.utf8))

    @Test func anUnsignedLockFromAStandInIsShownOnceAndNeverRemembered() throws {
        let fixture = try PAMFixture()
        let standIn = try FaultyServer { _ in Self.plantedLock }
        try fixture.redirectEnrolments(to: standIn.url)
        let before = try Data(contentsOf: URL(fileURLWithPath: statePath(fixture)))
        let planted = try fixture.login(answers: [])
        #expect(planted.code == PAMCode.maxTries)
        #expect(planted.conversation == (try PAMFixture.golden("locked-permanently")))
        #expect(try Data(contentsOf: URL(fileURLWithPath: statePath(fixture))) == before, "the state file is as it was")
        try fixture.redirectEnrolments(to: fixture.manager.url.description, from: standIn.url)
        #expect(try fixture.login().code == PAMCode.success, "the real manager knows no lock")
        // Honest control: a lock the real manager signs is remembered.
        #expect(try fixture.login(answers: ["13570"]).code == PAMCode.authError)
        #expect(try pendingLockouts(fixture).count == 1)
    }
}

/// Results written from several threads, read once all are done.
final class LoginResults: @unchecked Sendable {
    private let lock = NSLock()
    private var results: [Result<PAMFixture.Login, any Error>?]

    init(count: Int) { results = Array(repeating: nil, count: count) }

    func set(_ index: Int, _ result: Result<PAMFixture.Login, any Error>) { lock.withLock { results[index] = result } }

    var values: [Result<PAMFixture.Login, any Error>] {
        lock.withLock { results.map { $0 ?? .failure(TestFailure("no result")) } }
    }
}
