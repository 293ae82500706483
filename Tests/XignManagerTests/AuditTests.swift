import Foundation
import Testing
import XignProtocol
import XignTestSupport

/// The audit table and `xign-manager admin audit`.
@Suite(.machineShare) struct AuditTests {
    struct Entry: Decodable {
        var event: String
        var email: String?
        var host: String?
        var service: String?
        var detail: String?
        var actor: String
    }

    func audit(_ manager: ManagerProcess, _ arguments: [String] = []) throws -> [Entry] {
        let result = try manager.admin(["audit", "--json"] + arguments)
        guard result.status == 0 else { throw TestFailure("admin audit: \(result.stderr)") }
        return try JSONDecoder().decode([Entry].self, from: Data(result.stdout.utf8))
    }

    @Test(arguments: TestDatabase.allCases) func aLoginAWrongPINALockoutAndTheUnlockAreListedWithTheirHostAndService(
        database: TestDatabase
    ) async throws {
        // keep_expired 2s: the expiry service runs every second, so the retention below is seen at work.
        let manager = try ManagerProcess(
            config: ManagerProcess.testConfig + "\n[storage]\nkeep_expired = 2s\n", database: database)
        let api = API(manager: manager)
        let device = try await api.enrolDevice("audited@example.org")
        #expect(try await api.authenticate(device, pin: "24680").status == 200)
        var locked = false
        for _ in 0..<4 where !locked {
            var answer = try await api.authenticate(device, pin: "13579")
            while answer.status == 423 {
                try await Task.sleep(for: .seconds(0.3))
                answer = try await api.authenticate(device, pin: "13579")
            }
            let lock =
                try answer.signedPayload(key: try api.managerKey, type: SignedAnswerType.authenticationResult)[
                    "lockout"] as? [String: Any]
            locked = (lock?["lockedUntil"] as? Double ?? 0) > Date().timeIntervalSince1970 * 1000
        }
        #expect(locked)
        let activation = try #require(try manager.query("SELECT id FROM activations").first)
        #expect(try manager.admin(["unlock", activation]).status == 0)

        let events = try audit(manager)
        #expect(
            events.map(\.event).filter { $0 != "loginFailure" } == [
                "accountCreated", "enrolment", "login", "lockout", "unlock",
            ])
        let login = try #require(events.first { $0.event == "login" })
        #expect(
            login.email == "audited@example.org" && login.host == "h" && login.service == "pam"
                && login.detail == "role login as u")
        #expect(login.actor == "device \(device.id)")
        let failures = events.filter { $0.event == "loginFailure" }
        #expect(
            failures.count >= 1
                && failures.allSatisfy {
                    $0.host == "h" && $0.service == "pam" && $0.detail?.contains("wrong PIN") == true
                })
        #expect(events.first { $0.event == "unlock" }?.actor.hasPrefix("admin ") == true)
        #expect(events.first { $0.event == "accountCreated" }?.actor == "registration from 127.0.0.1")

        // The text form says the same; --since takes a duration or a time, and says what it wants otherwise.
        let text = try manager.admin(["audit"])
        #expect(
            text.status == 0 && text.stdout.contains("\tlockout\taudited@example.org, host h, service pam"),
            "\(text.stdout)")
        #expect(try audit(manager, ["--since", "2099-01-01T00:00:00Z"]).isEmpty)
        let wrong = try manager.admin(["audit", "--since", "yesterday"])
        #expect(wrong.status != 0 && wrong.stderr.contains("a duration such as 24h"), "\(wrong.stderr)")

        // Entries older than audit.keep go; the rest stay.
        _ = try manager.query(
            "INSERT INTO audit_events (id, at, event, actor) VALUES ('old', 1000, 'login', 'device x')")
        #expect(try waitUntil { try manager.query("SELECT COUNT(*) FROM audit_events WHERE id = 'old'") == ["0"] })
        #expect(try audit(manager).count == events.count)
    }
}
