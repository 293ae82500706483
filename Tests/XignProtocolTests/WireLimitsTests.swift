import Testing
import XignProtocol

/// The wire's limits, declared on the messages: each refusal names its field, and beside each the same message
/// within the limit passes.
@Suite struct WireLimitsTests {
    static func start(
        purpose: AuthenticationPurpose = .login(service: "pam"), code: String? = nil, localUser: String = "alice",
        host: String = "db1",
        report: OfflineReportMessage? = nil
    ) -> AuthenticationStartRequest {
        AuthenticationStartRequest(
            deviceId: "d", challenge: "c", purpose: purpose, confirmationCode: code, host: host, localUser: localUser,
            nonce: "n",
            offlineReport: report)
    }

    func refusal(_ message: some LimitedMessage) -> String? {
        do {
            try message.checkLimits()
            return nil
        } catch { return error.field }
    }

    @Test func aFieldAtItsLimitPassesAndOneByteMoreIsRefused() {
        #expect(refusal(Self.start(localUser: String(repeating: "a", count: WireLimit.localUser))) == nil)
        #expect(refusal(Self.start(localUser: String(repeating: "a", count: WireLimit.localUser + 1))) == "localUser")
        #expect(refusal(Self.start(localUser: "")) == "localUser")
        #expect(refusal(Self.start(localUser: "al\u{1b}[2Jice")) == "localUser")
        #expect(refusal(Self.start(host: String(repeating: "h", count: WireLimit.hostName))) == nil)
        #expect(refusal(Self.start(host: String(repeating: "h", count: WireLimit.hostName + 1))) == "host")
        let nonce = String(repeating: "n", count: WireLimit.nonce)
        #expect(refusal(TokenRequest(authorizationCode: "code", nonce: nonce)) == nil)
        #expect(refusal(TokenRequest(authorizationCode: "code", nonce: nonce + "n")) == "nonce")
        #expect(refusal(TokenRequest(authorizationCode: "code", nonce: "")) == "nonce")
    }

    @Test func onlyAnApprovalCarriesAConfirmationCodeAndItMustCarryIt() {
        #expect(refusal(Self.start(purpose: .confirmation(id: "c1"), code: "123456")) == nil)
        #expect(refusal(Self.start(purpose: .confirmation(id: "c1"))) == "confirmationCode")
        #expect(refusal(Self.start(code: "123456")) == "confirmationCode")
        #expect(refusal(Self.start(purpose: .confirmation(id: ""), code: "123456")) == "purpose.confirmation.id")
        #expect(
            refusal(Self.start(purpose: .confirmation(id: "c1"), code: String(repeating: "1", count: 17)))
                == "confirmationCode")
    }

    @Test func anOfflineReportNeedsIncreasingSequencesWithinItsSize() {
        let event = { (sequence: Int64) in
            OfflineEventMessage(sequence: sequence, at: 1, kind: .login, service: "login")
        }
        #expect(
            refusal(Self.start(report: OfflineReportMessage(events: [event(1), event(2)], droppedLogins: 0))) == nil)
        #expect(
            refusal(Self.start(report: OfflineReportMessage(events: [event(2), event(2)], droppedLogins: 0)))
                == "offlineReport.events")
        let many = (1...Int64(OfflineReportMessage.maximumEvents + 1)).map(event)
        #expect(
            refusal(Self.start(report: OfflineReportMessage(events: many, droppedLogins: 0))) == "offlineReport.events")
        #expect(
            refusal(Self.start(report: OfflineReportMessage(events: [], droppedLogins: -1)))
                == "offlineReport.droppedLogins")
    }

    @Test func answersAreCheckedToo() {
        let lock = LockoutMessage(isPermanent: false, lockedUntil: 2, failedAttempts: 1, issuedAt: 1)
        let next = String(repeating: "c", count: WireLimit.nonce)
        #expect(refusal(AuthenticationResultMessage(nonce: "n", outcome: .lockout(lock, nextChallenge: next))) == nil)
        #expect(
            refusal(AuthenticationResultMessage(nonce: "n", outcome: .lockout(lock, nextChallenge: next + "c")))
                == "nextChallenge")
        #expect(refusal(ChallengeMessage(challenge: "", expiresAt: 1)) == "challenge")
        #expect(refusal(ChallengeMessage(challenge: "c", expiresAt: 1)) == nil)
    }

    @Test func aDigestOfTheFingersIsSHA256InBase64URL() {
        let digest = String(repeating: "A", count: WireLimit.biometricDigest)
        let finish = { (enrolment: String?) in
            AuthenticationFinishRequest(
                authenticationId: "a", role: "login", factors: [.device, .biometric], sealedPin: nil,
                attributeValues: [:],
                attributeSelections: [:], nonce: "n", biometricEnrolment: enrolment)
        }
        #expect(refusal(finish(digest)) == nil)
        #expect(refusal(finish(nil)) == nil)
        #expect(refusal(finish(digest + "A")) == "biometricEnrolment")
        #expect(refusal(finish(String(repeating: "+", count: WireLimit.biometricDigest))) == "biometricEnrolment")
    }
}
