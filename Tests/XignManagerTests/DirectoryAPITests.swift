import Foundation
import Testing
import XignCrypto
import XignProtocol
import XignTestSupport

/// POST /v1/hosts/directory on SQLite and PostgreSQL: what a host gets, and what it may not.
@Suite struct DirectoryAPITests {
    @Test(arguments: TestDatabase.allCases) func aHostGetsItsSignedDirectoryOncePerChallenge(
        database: TestDatabase
    ) async throws {
        try await InProcessManager.run(database: database) { inProcess in
            let api = inProcess.api
            _ = try await api.enrolDevice("alice@example.org")
            _ = try await api.enrolDevice("bob@example.org")
            try api.manager.giveLogin("alice@example.org", "alice")
            let host = try await JoinedHost(api)
            let (answer, replay) = try await host.directory()
            let directory = try answer.signedPayload(key: try api.managerKey, type: SignedAnswerType.hostDirectory)
            let users = directory["users"] as? [[String: Any]] ?? []
            #expect(directory["nonce"] as? String == "d" && directory["hostId"] as? String == host.hostId)
            #expect(users.map { $0["loginName"] as? String } == ["alice"], "bob has no login name")
            let uid = try #require(users.first?["uid"] as? Int64)
            #expect(UnixIdRange.standard.contains(uid))
            // One lookup: by number, by name, and a name that is not there.
            let byNumber = try await host.directory(uid: uid).answer.signedPayload(
                key: try api.managerKey, type: SignedAnswerType.hostDirectory)
            #expect((byNumber["users"] as? [[String: Any]])?.count == 1)
            let missing = try await host.directory(loginName: "carol").answer.signedPayload(
                key: try api.managerKey, type: SignedAnswerType.hostDirectory)
            #expect((missing["users"] as? [[String: Any]])?.isEmpty == true)
            // Refused: the same request again (its challenge is spent), another key's signature, both fields at once.
            #expect(try await replay().errorCode == "challengeInvalid")
            let forged = try await host.directory(key: try P256PrivateKey()).answer
            #expect(forged.status == 401, "\(forged.json)")
            let both = try await host.directory(loginName: "alice", uid: uid).answer
            #expect(both.status == 400, "\(both.json)")
        }
    }

    /// A lock reaches the hosts through the directory: the account stays (its files keep their owner's name), marked
    /// locked and with no local group; unlocked, its groups come back. Beside it, bob in the same host group keeps his.
    @Test(arguments: TestDatabase.allCases) func aLockedAccountStaysMarkedAndLosesItsLocalGroups(
        database: TestDatabase
    ) async throws {
        try await InProcessManager.run(database: database) { inProcess in
            let api = inProcess.api
            for (email, name) in [("alice@example.org", "alice"), ("bob@example.org", "bob")] {
                _ = try await api.enrolDevice(email)
                try api.manager.giveLogin(email, name)
            }
            #expect(try api.manager.admin(["groups", "set-local", "web", "sudo"]).status == 0)
            let host = try await JoinedHost(api, groups: ["web"])
            for email in ["alice@example.org", "bob@example.org"] {
                #expect(try api.manager.admin(["accounts", "set-host-groups", email, "web"]).status == 0)
            }
            func entries() async throws -> [String: [String: Any]] {
                let payload = try await host.directory().answer.signedPayload(
                    key: try api.managerKey, type: SignedAnswerType.hostDirectory)
                let users = payload["users"] as? [[String: Any]] ?? []
                return Dictionary(uniqueKeysWithValues: users.map { ($0["loginName"] as? String ?? "", $0) })
            }
            var users = try await entries()
            #expect(
                users["alice"]?["localGroups"] as? [String] == ["sudo"] && users["alice"]?["locked"] as? Bool == false)

            #expect(try api.manager.admin(["accounts", "lock", "alice@example.org"]).status == 0)
            users = try await entries()
            #expect(users["alice"]?["locked"] as? Bool == true, "\(users)")
            #expect(users["alice"]?["localGroups"] as? [String] == [], "\(users)")
            #expect(users["bob"]?["localGroups"] as? [String] == ["sudo"] && users["bob"]?["locked"] as? Bool == false)
            let one = try await host.directory(loginName: "alice").answer.signedPayload(
                key: try api.managerKey, type: SignedAnswerType.hostDirectory)
            #expect((one["users"] as? [[String: Any]])?.first?["locked"] as? Bool == true)

            #expect(try api.manager.admin(["accounts", "unlock", "alice@example.org"]).status == 0)
            users = try await entries()
            #expect(
                users["alice"]?["localGroups"] as? [String] == ["sudo"] && users["alice"]?["locked"] as? Bool == false)
        }
    }
}
