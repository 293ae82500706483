import Foundation
import Testing
import XignCrypto
import XignProtocol
import XignTestSupport

@testable import XignCore

/// The host's side of a login confirmation: only a decision the pinned manager key signed for this very request
/// lets anyone in.
@Suite struct ConfirmationTests {
    /// A manager, alice's enrolled machine, and a joined host; `user` gets login name `user`.
    final class Setup: @unchecked Sendable {
        let fixture: Fixture
        let laptop: XignSdk
        let idmIdentifier: String

        init() throws {
            fixture = try Fixture()
            idmIdentifier = try fixture.personalize(try fixture.register("alice@example.org")).idmIdentifier
            laptop = try fixture.sdk()
            try fixture.manager.giveLogin("alice@example.org", "alice")
        }

        /// A new host named `name` with its own state directory.
        func host(_ name: String) throws -> XignSdk {
            let added = try fixture.manager.admin(["hosts", "add", name])
            let sdk = try fixture.sdk(user: "root", stateDirectory: fixture.directory.file("host-\(name)"))
            _ = try sdk.joinHost(
                managerURL: fixture.manager.url,
                token: try HostJoinToken(parsing: String(added.stdout.split(separator: " ").last ?? "")))
            return sdk
        }

        /// Approves the confirmation from alice's machine with the right code and PIN.
        func approve(_ pending: PendingLoginConfirmation) throws {
            let authenticator = laptop.authenticator
            let request = try authenticator.startAuthenticationSynchronous(
                confirmation: ConfirmationInitializationData(
                    idmIdentifier: idmIdentifier, confirmationId: pending.confirmationId, code: pending.code))
            guard
                case .success(let information) = try authenticator.prepareAuthenticationUserInformationSynchronous(
                    request: request)
            else {
                throw TestFailure("prepare failed")
            }
            try information.sign(factor: DeviceFactor())
            try information.sign(factor: PinFactor("24680"))
            guard case .userLogin(let login) = try authenticator.finishConfirmationSynchronous(userInfo: information)
            else {
                throw TestFailure("no userLogin")
            }
            #expect(login.loginName == pending.loginName && login.relyingPartyName == pending.hostName)
        }

        /// The signed wait answer the real manager gives for `pending`, as the bytes on the wire.
        func genuineAnswer(_ pending: PendingLoginConfirmation) throws -> [UInt8] {
            let body = try JSONEncoder.canonical.encode(
                ConfirmationWaitRequest(
                    confirmationId: pending.confirmationId, waitToken: pending.waitToken, waitMilliseconds: 0))
            let response = try HTTPClient().send(
                "POST", to: fixture.manager.url, path: APIPath.confirmationWait, body: body)
            return FaultyServer.http(contentType: "application/jose", body: Array(response.body))
        }
    }

    /// The same pending confirmation, waited for through a stand-in for the manager.
    func through(_ url: String, _ pending: PendingLoginConfirmation) throws -> PendingLoginConfirmation {
        var host = pending.host
        host.managerURL = try ManagerURL(url)
        return PendingLoginConfirmation(
            confirmationId: pending.confirmationId, code: pending.code, payload: pending.payload,
            appLink: pending.appLink,
            hostName: pending.hostName,
            loginName: pending.loginName, service: pending.service, expiresAt: pending.expiresAt,
            waitToken: pending.waitToken, nonce: pending.nonce,
            host: host, managerKey: pending.managerKey
        )
    }

    @Test func onlyTheDecisionSignedForThisRequestLetsTheUserIn() throws {
        let setup = try Setup()
        let web = try setup.host("web1"), db = try setup.host("db1")
        // Genuine approved decisions, each for another request: another host's, another service's, an earlier one of this host.
        let other = try db.startLoginConfirmation(
            loginName: "alice", service: "sshd", remoteHost: nil, tty: nil, command: nil)
        try setup.approve(other)
        let otherHost = try setup.genuineAnswer(other)
        let earlier = try web.startLoginConfirmation(
            loginName: "alice", service: "sudo", remoteHost: nil, tty: nil, command: nil)
        try setup.approve(earlier)
        let replayed = try setup.genuineAnswer(earlier)
        let attacker = try P256PrivateKey()

        let pending = try web.startLoginConfirmation(
            loginName: "alice", service: "sshd", remoteHost: "192.0.2.7", tty: "ssh", command: nil)
        let forged: [UInt8] = try {
            let result = ConfirmationResultMessage(
                nonce: pending.nonce, confirmationId: pending.confirmationId, hostId: pending.host.hostId,
                loginName: "alice", service: "sshd", state: .approved, approvedBy: "x")
            let header = JWS.Header(typ: SignedAnswerType.confirmationResult, kid: attacker.publicKey.fingerprint)
            return FaultyServer.http(
                contentType: "application/jose",
                body: Array(try JWS.sign(payload: JSONEncoder().encode(result), header: header, with: attacker).utf8)
            )
        }()
        for (name, answer) in [("forged", forged), ("replayed", replayed), ("other host", otherHost)] {
            let standIn = try FaultyServer { _ in answer }
            let error = #expect(throws: XignSdkError.self, "\(name)") {
                try web.waitForDecision(try through(standIn.url, pending), upTo: 0)
            }
            #expect(error?.errorCode == .managerSignatureInvalid, "\(name): \(error?.message ?? "")")
        }
        // Honest control: the same request, approved for real, is believed.
        #expect(try web.waitForDecision(pending, upTo: 0) == .pending)
        try setup.approve(pending)
        #expect(try web.waitForDecision(pending, upTo: 5_000) == .approved(byDevice: setup.idmIdentifier))
    }

    @Test func aLongPollAnswersSoonAfterTheApproval() throws {
        let setup = try Setup()
        let web = try setup.host("web1")
        let pending = try web.startLoginConfirmation(
            loginName: "alice", service: "sshd", remoteHost: nil, tty: nil, command: nil)
        let approver = Thread.detachedResult { try setup.approve(pending) }
        let started = Date()
        #expect(try web.waitForDecision(pending, upTo: 8_000) == .approved(byDevice: setup.idmIdentifier))
        try approver.value(timeout: 10)
        #expect(Date().timeIntervalSince(started) < 6, "the wait ends with the approval, not at its limit")
    }
}
