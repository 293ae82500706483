import Foundation
import Testing
import XignProtocol
import XignTestSupport

/// POST /v1/hosts/covers, /use and /end on SQLite and PostgreSQL: a cover opens only for an approval the manager gave
/// this host and login name, once, where the host's policy says `session`; each use is decided again and audited; the
/// session's end, the administrator and a lock end it.
@Suite struct SessionCoverAPITests {
    @Test(arguments: TestDatabase.allCases) func aCoverOpensOnlyForItsApprovalAndHoldsOnlyForItsSession(
        database: TestDatabase
    ) async throws {
        try await InProcessManager.run(config: WaitingTests.config, database: database) { inProcess in
            let api = inProcess.api
            let setup = try await WaitingTests.Waiting(api)
            let host = setup.host
            let other = try await JoinedHost(api, name: "web2")
            func open(
                _ confirmation: String, on host: JoinedHost<ManagerFiles> = host, session: Int64 = 41
            )
                async throws -> APIAnswer
            {
                try await host.signed(APIPath.sessionCovers) {
                    SessionCoverRequest(
                        hostId: host.hostId, challenge: $0, nonce: "c", confirmationId: confirmation,
                        loginName: "alice", auditSession: session)
                }
            }
            func use(_ cover: String, service: String = "sudo", session: Int64 = 41) async throws -> APIAnswer {
                try await host.signed(APIPath.sessionCoverUse) {
                    SessionCoverUseRequest(
                        hostId: host.hostId, challenge: $0, nonce: "u", coverId: cover, loginName: "alice",
                        service: service, auditSession: session)
                }
            }
            func approved() async throws -> String {
                let confirmation = try await setup.start()
                try await setup.approve(confirmation, through: api)
                return confirmation.id
            }

            // Every host is fresh by default: nothing is covered.
            let first = try await approved()
            let fresh = try await open(first)
            #expect(fresh.status == 409 && "\(fresh.json)".contains("set-sudo"), "\(fresh.json)")
            #expect(try api.manager.admin(["groups", "set-sudo", "*", "session", "--service", "sudo"]).status == 0)

            // Not approved yet; another host; then the approval's own host, once.
            let pending = try await setup.start(from: "192.0.2.9")
            #expect(try await open(pending.id).status == 409)
            #expect(try await open(first, on: other).status == 409, "web2 did not ask for this approval")
            let opened = try await open(first)
            let cover = try opened.signedPayload(key: try api.managerKey, type: SignedAnswerType.sessionCover)
            #expect(cover["nonce"] as? String == "c" && cover["auditSession"] as? Int64 == 41, "\(opened.json)")
            let coverId = try #require(cover["coverId"] as? String)
            #expect(try await open(first, session: 42).status == 409, "one approval covers one session")

            // Its session, its user, a service the policy names: passes, and the audit says on which approval.
            let used = try await use(coverId)
            #expect(used.status == 200, "\(used.json)")
            #expect(try api.manager.admin(["audit"]).stdout.contains("sudo in session of approval \(first)"))
            #expect(try await use(coverId, session: 42).status == 404, "another audit session")
            #expect(try await use(coverId, service: "su").status == 409, "su is fresh: only sudo is named")
            let forged = try await host.signed(APIPath.sessionCoverUse, key: try .init()) {
                SessionCoverUseRequest(
                    hostId: host.hostId, challenge: $0, nonce: "u", coverId: coverId, loginName: "alice",
                    service: "sudo", auditSession: 41)
            }
            #expect(forged.status == 401)

            // The administrator ends it; a new approval's cover ends with the session; a lock ends the rest.
            #expect(try api.manager.admin(["accounts", "covers", "alice@example.org"]).stdout.contains(coverId))
            #expect(try api.manager.admin(["accounts", "covers", "alice@example.org", "--end"]).status == 0)
            let ended = try await use(coverId)
            #expect(ended.status == 409 && "\(ended.json)".contains("was ended"), "\(ended.json)")
            let second =
                try await open(try await approved(), session: 43).signedPayload(
                    key: try api.managerKey, type: SignedAnswerType.sessionCover)["coverId"] as? String ?? ""
            let closed = try await host.signed(APIPath.sessionCoverEnd) {
                SessionCoverEndRequest(hostId: host.hostId, challenge: $0, coverId: second)
            }
            #expect(closed.status == 204, "\(closed.json)")
            #expect(try await use(second, session: 43).status == 409)
            let third =
                try await open(try await approved(), session: 44).signedPayload(
                    key: try api.managerKey, type: SignedAnswerType.sessionCover)["coverId"] as? String ?? ""
            #expect(try await use(third, session: 44).status == 200, "the control before the lock")
            #expect(try api.manager.admin(["accounts", "lock", "alice@example.org"]).status == 0)
            let locked = try await use(third, session: 44)
            #expect(locked.status == 409 && "\(locked.json)".contains("locked"), "\(locked.json)")
        }
    }

    /// The directory carries each host's policies: the strictest line of its groups for each service.
    @Test func theDirectoryCarriesTheStrictestPolicyOfTheHostsGroups() async throws {
        try await InProcessManager.run { inProcess in
            let api = inProcess.api
            let host = try await JoinedHost(api, groups: ["web", "db"])
            for arguments in [
                ["groups", "set-sudo", "web", "session"], ["groups", "set-sudo", "db", "fresh", "--service", "su"],
                ["groups", "set-sudo", "other", "fresh"],
            ] {
                #expect(try api.manager.admin(arguments).status == 0, "\(arguments)")
            }
            let payload = try await host.directory().answer.signedPayload(
                key: try api.managerKey, type: SignedAnswerType.hostDirectory)
            #expect(payload["sudoPolicies"] as? [String: String] == ["*": "session", "su": "fresh"], "\(payload)")
            #expect(try api.manager.admin(["groups", "set-sudo", "web", "sometimes"]).status != 0)
        }
    }
}
