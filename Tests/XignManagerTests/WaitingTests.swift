import Foundation
import Testing
import XignCrypto
import XignProtocol
import XignTestSupport

@testable import XignManager

/// Hosts waiting for an approval cost the database nothing until something is decided: each wait is woken by the
/// decision, on its own instance at once, on another by PostgreSQL's NOTIFY, and by the sweep when that was lost.
@Suite struct WaitingTests {
    static let config =
        ManagerProcess.testConfig + """

            [confirmation]
            max_pending = 20
            max_pending_per_account = 100
            """

    /// A manager with alice's device and a joined host, and what the host started.
    struct Waiting<Manager: ManagerFiles> {
        let api: API<Manager>
        let device: (id: String, key: P256PrivateKey)
        let host: JoinedHost<Manager>

        init(_ api: API<Manager>) async throws {
            self.api = api
            device = try await api.enrolDevice("alice@example.org")
            try api.manager.giveLogin("alice@example.org", "alice")
            host = try await JoinedHost(api)
        }

        func start(from address: String = "192.0.2.7") async throws -> (id: String, code: String, waitToken: String) {
            let started = try await host.start("alice", remoteHost: address).signedPayload(
                key: try api.managerKey, type: SignedAnswerType.confirmationStart)
            return (
                started["confirmationId"] as? String ?? "", started["code"] as? String ?? "",
                started["waitToken"] as? String ?? ""
            )
        }

        /// The host's wait through `api`: the state it was answered and how long it took.
        func wait(
            _ confirmation: (id: String, code: String, waitToken: String), upTo milliseconds: Int
        ) async throws -> (
            state: String, seconds: Double
        ) {
            let started = Date()
            let answer = try await api.post(
                APIPath.confirmationWait,
                ConfirmationWaitRequest(
                    confirmationId: confirmation.id, waitToken: confirmation.waitToken, waitMilliseconds: milliseconds))
            let state =
                try answer.signedPayload(key: try api.managerKey, type: SignedAnswerType.confirmationResult)["state"]
                as? String ?? "?"
            return (state, Date().timeIntervalSince(started))
        }

        /// The state the wait answered and when it was answered.
        func waitedState(
            _ confirmation: (id: String, code: String, waitToken: String), upTo milliseconds: Int
        ) async throws -> (String, Date) {
            (try await wait(confirmation, upTo: milliseconds).state, Date())
        }

        /// alice approves on her device, through `api`.
        func approve(
            _ confirmation: (id: String, code: String, waitToken: String), through api: API<some ManagerFiles>
        ) async throws {
            let started = try await api.postStart(
                device, purpose: .confirmation(id: confirmation.id), code: confirmation.code
            )
            .signedPayload(key: try api.managerKey, type: SignedAnswerType.authenticationStart)
            let finished = try await api.finishAuthentication(
                started, pin: "24680", signer: device.key, role: "confirm")
            guard finished.status == 200 else { throw TestFailure("the approval failed: \(finished.json)") }
        }
    }

    @Test(arguments: TestDatabase.allCases) func waitingHostsCostTheDatabaseNothingUntilTheDecision(
        database: TestDatabase
    ) async throws {
        try await InProcessManager.run(config: Self.config, database: database) { inProcess in
            let setup = try await Waiting(inProcess.api)
            // The statements this manager has sent its database (what /metrics shows as xign_database_statements_total).
            let statements = { Double(inProcess.manager.database.statements.total) }
            var waiting: [(id: String, code: String, waitToken: String)] = []
            for host in 1...10 { waiting.append(try await setup.start(from: "192.0.2.\(host)")) }
            let confirmations = waiting
            // Each host waits four times in a row, 1 s each, as pam_xign's waits follow each other.
            let before = statements()
            let started = ContinuousClock.now
            let states = try await inParallel(confirmations.count) { index in
                var states: [String] = []
                for _ in 0..<4 { states.append(try await setup.wait(confirmations[index], upTo: 1_000).state) }
                return states
            }
            let spent = statements() - before
            #expect(states.allSatisfy { $0 == ["pending", "pending", "pending", "pending"] })
            // One read per confirmation (BEGIN, SELECT, COMMIT; PostgreSQL also sets its durability), and for each sweep
            // (every 5 s) its own read and one more read per confirmation, since a sweep forgets what the waits keep. A
            // loaded machine stretches the window over more sweeps. Polling every 250 ms would be 16 reads per confirmation.
            let read = database == .sqlite ? 3.0 : 4.0
            let sweeps = ((ContinuousClock.now - started) / .seconds(5)).rounded(.up) + 1
            let bound = read * (10 * (1 + sweeps) + sweeps) + 2
            #expect(spent <= bound, "\(spent) statements for 40 waits of 10 hosts over \(sweeps) sweeps at most")
            #expect(bound < read * 10 * 16 / 2, "the bound still tells waiting from polling")

            // Honest control: the decision still reaches the host at once, and a wait after it reads it.
            async let waiter = setup.wait(confirmations[0], upTo: 20_000)
            try await Task.sleep(for: .seconds(0.5))
            try await setup.approve(confirmations[0], through: setup.api)
            let woken = try await waiter
            #expect(woken.state == "approved" && woken.seconds < 5, "\(woken)")
            await #expect(try setup.wait(confirmations[0], upTo: 0).state == "approved")
            await #expect(try setup.wait(confirmations[1], upTo: 0).state == "pending", "the other hosts still wait")
        }
    }

    @Test(.machineShare) func aDecisionOnAnotherInstanceWakesTheWaitAtOnce() async throws {
        let first = try ManagerProcess(config: Self.config, database: .postgreSQL)
        let second = try ManagerProcess(sharingDatabaseWith: first)
        let setup = try await Waiting(API(manager: first))
        let other = API(manager: second)
        // Three in a row, so that a sweep (every 5 s) that happened to come at the right moment cannot pass it.
        for round in 1...3 {
            let confirmation = try await setup.start(from: "192.0.2.\(round)")
            async let waiter = setup.waitedState(confirmation, upTo: 20_000)
            try await Task.sleep(for: .seconds(0.5))
            try await setup.approve(confirmation, through: other)
            let approved = Date()
            let (state, answered) = try await waiter
            let afterApproval = answered.timeIntervalSince(approved)
            #expect(
                state == "approved" && afterApproval < 1.5,
                "NOTIFY, not the sweep nor the wait's end: \(state) \(afterApproval) s")
        }
    }

    /// A decision whose notification never came (an instance that stopped between its commit and its NOTIFY, a
    /// listening connection that broke): the row is changed in the database alone, and the sweep finds it.
    @Test(arguments: TestDatabase.allCases) func aDecisionWithoutItsNotificationIsFoundBySweep(
        database: TestDatabase
    ) async throws {
        try await InProcessManager.run(config: Self.config, database: database) { inProcess in
            let setup = try await Waiting(inProcess.api)
            let confirmation = try await setup.start()
            async let waiter = setup.wait(confirmation, upTo: 24_000)
            try await Task.sleep(for: .seconds(1))
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            _ = try setup.api.manager.query(
                "UPDATE confirmations SET state = 'denied', changed_at = \(now) WHERE id = '\(confirmation.id)'")
            let woken = try await waiter
            #expect(
                woken.state == "denied" && woken.seconds < 12,
                "within a sweep or two, not at the wait's end (24 s): \(woken)")
        }
    }
}
