import Foundation
import Testing
import XignCrypto
import XignProtocol
import XignTestSupport

/// PostgreSQL fails over under load: two manager instances reach a primary with a synchronous standby through one
/// address (ReplicatedPostgreSQL says why a proxy); clients log in with right and wrong PINs over both; the primary
/// is killed, the standby promoted and the address moved. A wrong PIN a client saw counted must still be counted,
/// since a guess the manager forgot is a free one; no answer may be a wrong verdict; while there is no primary the
/// managers answer 503 with what to do, and they find the new primary by themselves.
@Suite(.machineShare) struct FailoverTests {
    /// 20 free wrong PINs, then 100 ms between them, and a permanent lock at 40: the clients stay below it.
    static let config = ManagerProcess.testConfig(
        firstLock: "100ms", longestLock: "100ms", maxAttempts: 40, freeAttempts: 20)
    static let wrongPIN = "13579"
    /// A wrong-PIN client stops at this many counted failures, below the permanent lock.
    static let wrongPINsPerAccount = 28

    /// One login attempt as a client saw it.
    enum Answer: Equatable {
        case signedIn
        /// A wrong PIN, counted: the failures the manager reported with it.
        case counted(Int)
        /// Refused before its PIN was read (a lock between two wrong PINs).
        case locked
        /// 503 with its message.
        case unavailable(String)
        /// 409: the start (committed without waiting for the standby) was lost in the failover; the client starts again.
        case startAgain(String)
        case other(Int, String)
    }

    struct Event {
        /// When the attempt was sent, and when its answer came.
        var sent: Date
        var at: Date
        var account: String
        var right: Bool
        var answer: Answer
    }

    @Test(arguments: [true, false]) func aFailoverForgetsNoCountedWrongPINAndGivesNoWrongVerdict(
        kill: Bool
    ) async throws {
        let cluster = try ReplicatedPostgreSQL()
        let (database, storage) = try cluster.makeDatabase()
        let first = try ManagerProcess(config: Self.config + "\n" + storage + "\n")
        let second = try ManagerProcess(sharingDatabaseWith: first)
        let apis = [API(manager: first), API(manager: second)]
        let key = try apis[0].managerKey
        var devices: [String: (id: String, key: P256PrivateKey)] = [:]
        for account in ["wrong0", "wrong1", "wrong2", "right0", "right1"] {
            devices[account] = try await apis[0].enrolDevice("\(account)@example.org")
        }
        let enrolled = devices
        let events = EventLog()
        let stop = ManagedFlag()

        func attempt(_ api: API<ManagerProcess>, _ account: String, pin: String) async throws -> Answer {
            let device = enrolled[account]!
            let start = try await api.postStart(device)
            guard start.status == 200 else { return Self.refusal(start) }
            let started = try start.signedPayload(key: key, type: SignedAnswerType.authenticationStart)
            let finish = try await api.finishAuthentication(started, pin: pin, signer: device.key)
            guard finish.status == 200 else { return Self.refusal(finish) }
            let result = try finish.signedPayload(key: key, type: SignedAnswerType.authenticationResult)
            if result["serviceLogin"] != nil { return .signedIn }
            let lock = result["lockout"] as? [String: Any]
            return .counted(lock?["failedAttempts"] as? Int ?? -1)
        }

        let load = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, account) in ["wrong0", "wrong1", "wrong2", "right0", "right1"].enumerated() {
                    let right = account.hasPrefix("right")
                    group.addTask {
                        var turn = index
                        while !stop.isSet {
                            turn += 1
                            let sent = Date()
                            let answer: Answer
                            do {
                                answer = try await attempt(
                                    apis[turn % 2], account, pin: right ? "24680" : Self.wrongPIN)
                            } catch {
                                // No answer at all (the client's 10 s timeout) is a login that hung.
                                answer = .other(0, "after \(Int(Date().timeIntervalSince(sent))) s: \(error)")
                            }
                            events.append(Event(sent: sent, at: Date(), account: account, right: right, answer: answer))
                            if case .counted(let failures) = answer, failures >= Self.wrongPINsPerAccount { return }
                            try await Task.sleep(for: .milliseconds(right ? 20 : 120))
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        // Until every client has had answers (a loaded machine takes its time), and a little longer.
        let started = Date()
        while Date().timeIntervalSince(started) < 30 {
            let answered = Set(events.all.filter { $0.answer != .locked }.map(\.account))
            if answered.count == enrolled.count { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        try await Task.sleep(for: .seconds(1))
        let killedAt = Date()
        if kill {
            try cluster.killPrimary()
            // No primary for a moment, as while Patroni or an operator decides.
            try await Task.sleep(for: .seconds(1))
            try cluster.failOver()
        }
        // Until every account has logged in again after the failover, or 40 s.
        let deadline = Date().addingTimeInterval(40)
        while Date() < deadline {
            let resumed = Set(events.all.filter { $0.sent > killedAt && $0.answer == .signedIn }.map(\.account))
            if resumed.isSuperset(of: ["right0", "right1"]) { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        try await Task.sleep(for: .seconds(1))
        stop.set()
        try await load.value

        let all = events.all
        // The first login sent after the kill that succeeded.
        let firstResumed = all.first { $0.sent > killedAt && $0.answer == .signedIn }
        let unavailable = all.filter { if case .unavailable = $0.answer { true } else { false } }
        print(
            "failover (kill: \(kill)): \(all.count) attempts, \(unavailable.count) answered 503, logins resumed "
                + (firstResumed.map { String(format: "%.2f s after the kill", $0.at.timeIntervalSince(killedAt)) }
                    ?? "never"))
        #expect(firstResumed != nil, "logins resumed after the failover")
        for event in all {
            switch event.answer {
            case .signedIn: #expect(event.right, "a wrong PIN signed in: \(event.account)")
            case .counted: #expect(!event.right, "a right PIN was counted as wrong: \(event.account)")
            case .locked: #expect(!event.right, "a right-PIN account was locked: \(event.account)")
            case .unavailable(let message):
                #expect(kill, "503 without a failover: \(message)")
                #expect(message.contains("try again"), "\(message)")
            case .startAgain(let message):
                #expect(kill, "409 without a failover: \(message)")
                #expect(message.contains("start again"), "\(message)")
            case .other(let status, let body):
                Issue.record(
                    "\(event.account), sent \(String(format: "%.2f", event.sent.timeIntervalSince(killedAt))) s after the kill: \(status) \(body)"
                )
            }
        }
        if all.contains(where: { if case .other = $0.answer { true } else { false } }) {
            try? first.log.write(toFile: "/tmp/dbg-first-\(getpid()).log", atomically: true, encoding: .utf8)
            try? second.log.write(toFile: "/tmp/dbg-second-\(getpid()).log", atomically: true, encoding: .utf8)
            // What went wrong at the instances: their warnings and errors.
            for (name, instance) in [("first", first), ("second", second)] {
                let lines = instance.log.split(separator: "\n").filter { $0.hasPrefix("<3>") || $0.hasPrefix("<4>") }
                print("\(name) instance:\n" + lines.suffix(40).joined(separator: "\n"))
            }
        }
        // Every wrong PIN a client saw counted is in the promoted database: the highest count it was told is there.
        for account in ["wrong0", "wrong1", "wrong2"] {
            let told =
                all.compactMap { event -> Int? in
                    guard event.account == account, case .counted(let failures) = event.answer else { return nil }
                    return failures
                }.max() ?? 0
            let stored = try cluster.query(
                "SELECT a.failed_attempts FROM activations a JOIN accounts c ON c.id = a.account_id WHERE c.email = '\(account)@example.org'",
                database: database)
            #expect(Int(stored).map { $0 >= told } == true, "\(account): told \(told), stored \(stored)")
            let beforeKill = all.contains { $0.account == account && $0.at < killedAt && $0.answer != .locked }
            #expect(beforeKill, "\(account) had wrong PINs counted before the kill")
        }
        // The lock still applies on the promoted primary: wrong PINs go on from the stored count to the permanent
        // lock at 40, after which the right PIN is refused.
        var last = 0
        for _ in 0..<200 {
            let answer = try await attempt(apis[0], "wrong0", pin: Self.wrongPIN)
            if case .counted(let failures) = answer { last = failures }
            if last >= 40 { break }
            if answer == .locked { try await Task.sleep(for: .milliseconds(120)) }
        }
        #expect(last == 40, "the permanent lock came at the configured count")
        let refused = try await apis[1].postStart(enrolled["wrong0"]!)
        #expect(refused.status == 423 && refused.errorCode == "lockedOut", "\(refused.status) \(refused.json)")
    }

    static func refusal(_ answer: APIAnswer) -> Answer {
        switch answer.status {
        case 423: .locked
        case 503: .unavailable(answer.error["message"] as? String ?? "")
        case 409 where answer.errorCode == "sessionInvalid": .startAgain(answer.error["message"] as? String ?? "")
        default: .other(answer.status, String(decoding: answer.body.prefix(300), as: UTF8.self))
        }
    }
}

/// What the clients saw, in order.
final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [FailoverTests.Event] = []

    func append(_ event: FailoverTests.Event) { lock.withLock { events.append(event) } }
    var all: [FailoverTests.Event] { lock.withLock { events } }
}

final class ManagedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false

    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}
