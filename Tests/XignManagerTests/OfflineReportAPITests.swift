import Foundation
import Testing
import XignCrypto
import XignProtocol
import XignTestSupport

/// The offline policy in the signed start answer, and the device's report of what happened offline, over HTTP and
/// checked against docs/openapi.yaml.
@Suite struct OfflineReportAPITests {
    static func offline(_ started: [String: Any]) -> [String: Any] { started["offline"] as? [String: Any] ?? [:] }

    static func login(_ sequence: Int64) -> OfflineEventMessage {
        OfflineEventMessage(
            sequence: sequence, at: Int64(Date().timeIntervalSince1970 * 1000) - 60_000, kind: .login, service: "i3lock"
        )
    }

    @Test func onlyATPMKeyIsOfferedOfflineLoginAndAnAccountMayHaveItsOwnPolicy() async throws {
        try await InProcessManager.run { inProcess in
            let api = inProcess.api
            let tpm = try await api.enrolDevice("tpm@example.org", keyKind: .tpm)
            let software = try await api.enrolDevice("software@example.org")
            #expect(Self.offline(try await api.startAuthentication(tpm))["graceMilliseconds"] as? Int == 7 * 86_400_000)
            #expect(Self.offline(try await api.startAuthentication(tpm))["maxFailures"] as? Int == 5)
            #expect(
                Self.offline(try await api.startAuthentication(software))["graceMilliseconds"] as? Int == 0,
                "a software key: no offline login")
            #expect(
                try api.manager.admin([
                    "accounts", "set-offline", "tpm@example.org", "--grace", "12h", "--max-failures", "3",
                ]).status == 0)
            let own = Self.offline(try await api.startAuthentication(tpm))
            #expect(own["graceMilliseconds"] as? Int == 12 * 3_600_000 && own["maxFailures"] as? Int == 3, "\(own)")
            #expect(try api.manager.admin(["accounts", "set-offline", "tpm@example.org", "--default"]).status == 0)
            #expect(Self.offline(try await api.startAuthentication(tpm))["maxFailures"] as? Int == 5)
            let refused = try api.manager.admin(["accounts", "set-offline", "tpm@example.org", "--max-failures", "50"])
            #expect(refused.status != 0 && refused.stderr.contains("from 1 to 20"), "\(refused.stderr)")
        }
    }

    @Test func aReportIsRecordedOnceThoughItIsSentAgain() async throws {
        try await InProcessManager.run { inProcess in
            let api = inProcess.api
            let device = try await api.enrolDevice("report@example.org", keyKind: .tpm)
            let report = OfflineReportMessage(events: [Self.login(1), Self.login(2)], droppedLogins: 0)
            for _ in 0..<2 {
                let started = try await api.postStart(device, offlineReport: report).signedPayload(
                    key: try api.managerKey, type: SignedAnswerType.authenticationStart)
                #expect(Self.offline(started)["reportedThrough"] as? Int == 2)
            }
            let audit = try api.manager.admin(["audit"]).stdout
            #expect(audit.components(separatedBy: "offlineLogin").count - 1 == 2, "\(audit)")
            #expect(audit.contains("i3lock"))
            // Only what is new is added.
            _ = try await api.postStart(
                device, offlineReport: OfflineReportMessage(events: [Self.login(2), Self.login(3)], droppedLogins: 0))
            #expect(try api.manager.admin(["audit"]).stdout.components(separatedBy: "offlineLogin").count - 1 == 3)

        }
    }

    @Test func aMalformedReportIsRefusedBeforeAnythingIsRecorded() async throws {
        try await InProcessManager.run { inProcess in
            let api = inProcess.api
            let device = try await api.enrolDevice("malformed@example.org", keyKind: .tpm)
            let wrongOrder = OfflineReportMessage(events: [Self.login(2), Self.login(1)], droppedLogins: 0)
            let tooMany = OfflineReportMessage(events: (1...101).map { Self.login(Int64($0)) }, droppedLogins: 0)
            var controlChar = Self.login(1)
            controlChar.service = "sudo\u{1b}[2J"
            var beforeTime = Self.login(1)
            beforeTime.at = -1
            let single = [controlChar, beforeTime].map { OfflineReportMessage(events: [$0], droppedLogins: 0) }
            for report in [wrongOrder, tooMany] + single {
                let answer = try await api.postStart(device, offlineReport: report)
                #expect(answer.status == 400, "\(answer.json)")
            }
            #expect(!(try api.manager.admin(["audit"]).stdout.contains("offlineLogin")))
            // Control: the same events in order are taken.
            #expect(
                try await api.postStart(
                    device,
                    offlineReport: OfflineReportMessage(events: [Self.login(1), Self.login(2)], droppedLogins: 0)
                ).status == 200)
        }
    }
}
