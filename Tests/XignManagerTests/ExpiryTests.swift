import Foundation
import Testing
import XignCrypto
import XignProtocol
import XignTestSupport

/// The database keeps what is still needed, not every login forever: expired authentications, sessions and
/// challenges are deleted while the manager runs, so its size stays flat under a steady load.
@Suite struct ExpiryTests {
    /// Logins per round. 10,000 in one run passed on both backends (5 minutes at today's speed, issue 15).
    static let logins = 180

    /// One login. One that outlived its 10 s session on a loaded machine is refused, rightly (its row runs out like the
    /// others), and is started again, at most twice; a refusal of a younger one is the answer.
    static func logIn<Manager>(
        _ api: API<Manager>, _ device: (id: String, key: P256PrivateKey)
    ) async throws -> APIAnswer {
        for _ in 0..<2 {
            let started = ContinuousClock.now
            let answer = try await api.authenticate(device, pin: "24680")
            let ranOut = answer.status == 409 && answer.errorCode == "challengeInvalid"
            guard ranOut && ContinuousClock.now - started >= .seconds(10) else { return answer }
        }
        return try await api.authenticate(device, pin: "24680")
    }

    @Test(arguments: TestDatabase.allCases) func expiredAuthenticationsAreDeletedAndTheDatabaseStaysItsSize(
        database: TestDatabase
    ) async throws {
        // Authentications live 10 s (the shortest session lifetime) and are deleted as soon as they ran out.
        let config = ManagerProcess.testConfig + "\n[session]\nlifetime = 10s\n[storage]\nkeep_expired = 0s\n"
        try await InProcessManager.run(config: config, database: database) { inProcess in
            let manager = inProcess.files
            let api = inProcess.api
            // A device per client, as many people log in at once: one activation's PIN checks take turns, and six at
            // once on one device could wait past the claim's 10 s on a loaded machine (a 503), which is not this
            // test's subject.
            let devices = try await api.enrolDevices("steady", count: 6)
            var sizes: [Int] = []
            for _ in 0..<2 {
                _ = try await inParallel(6) { client in
                    for _ in 0..<(Self.logins / 6) {
                        // Start, finish and redeem the code, exactly what pam_xign does.
                        let answer = try await Self.logIn(api, devices[client])
                        let login =
                            try answer.signedPayload(key: api.managerKey, type: SignedAnswerType.authenticationResult)[
                                "serviceLogin"] as? [String: Any]
                        guard let code = login?["authorizationCode"] as? String,
                            try await api.post(APIPath.token, TokenRequest(authorizationCode: code, nonce: "t")).status
                                == 200
                        else {
                            throw TestFailure("login \(client) failed: \(answer.json)")
                        }
                    }
                }
                #expect(
                    try manager.query("SELECT COUNT(*) FROM authentications") != ["0"],
                    "fresh logins are kept while they may be redeemed")
                // Every row runs out within 10 s and is deleted within a purge interval after.
                #expect(
                    try await pollUntil(seconds: 20) {
                        try manager.query("SELECT COUNT(*) FROM authentications") == ["0"]
                    })
                sizes.append(try manager.databaseSize())
            }
            #expect(
                sizes[1] <= sizes[0] * 5 / 4,
                "the database grew from \(sizes[0]) to \(sizes[1]) bytes over the second round")
        }
    }
}
