import Foundation
import Testing
import XignCrypto
import XignProtocol
import XignTestSupport

@testable import XignCore

/// InApp authentication, as pam_xign runs it, through the real manager.
@Suite struct AuthenticationTests {
    /// An enrolled machine: registered, personalized, ready to log in.
    func enrolled(_ fixture: Fixture, email: String = "auth@example.org") throws -> (XignSdk, PersonalizationResult) {
        let result = try fixture.personalize(try fixture.register(email))
        return (try fixture.sdk(), result)
    }

    /// The whole login: start, confirm, sign with device and PIN, finish, token.
    func login(
        _ sdk: XignSdk, _ id: String, pin: String, role: String = "login", user: String = "alice",
        host: String = "host-a"
    ) throws -> (LoginAuthenticationResult, AuthenticationInitializationData) {
        let authenticator = sdk.authenticator
        let data = try authenticator.fetchInAppAuthenticationInitializationData(
            idmIdentifier: id, service: "pam", host: host, localUser: user)
        let request = try authenticator.startAuthenticationSynchronous(data: data)
        guard let chosen = request.roles.first(where: { $0.name == role }), request.setSelection(chosen) != nil else {
            throw TestFailure("no role \(role)")
        }
        guard
            case .success(let information) = try authenticator.prepareAuthenticationUserInformationSynchronous(
                request: request)
        else {
            throw TestFailure("attributes not confirmed")
        }
        try information.sign(factor: DeviceFactor())
        try information.sign(factor: PinFactor(pin))
        return (try authenticator.finishAuthenticationSynchronous(userInfo: information), data)
    }

    @Test func theRightPINGivesAServiceLoginAndATokenBoundToHostAndUser() throws {
        let fixture = try Fixture()
        let (sdk, enrolment) = try enrolled(fixture)
        let (result, data) = try login(sdk, enrolment.idmIdentifier, pin: "24680", role: "sudo")
        guard case .serviceLogin(let login) = result else {
            Issue.record("expected serviceLogin")
            return
        }
        #expect(login.roleName == "sudo")
        #expect(login.relyingPartyName == "Linux login")
        let code = try sdk.authenticator.fetchAuthorizationCode(login)
        let token = try sdk.authenticator.fetchToken(code, expecting: data)
        #expect(token.subject == "auth@example.org")
        #expect(token.host == "host-a")
        #expect(token.localUser == "alice")
        #expect(token.role == "sudo")
        #expect(token.expiresAt > Date())
        // The token came with the finish: fetching it needs the manager no more. The control: a code, which would need it,
        // now fails.
        fixture.manager.stop()
        #expect(try sdk.authenticator.fetchToken(code, expecting: data) == token)
        #expect(throws: XignSdkError.self) {
            _ = try sdk.authenticator.fetchToken(
                AuthorizationCode(code: "c", idmIdentifier: enrolment.idmIdentifier), expecting: data)
        }
    }

    /// A login changes nothing on this machine, so it neither syncs a file nor fails where the state is read-only.
    @Test func aSuccessfulLoginWritesNothingToTheStateDirectory() throws {
        let fixture = try Fixture()
        let (sdk, enrolment) = try enrolled(fixture)
        let state = fixture.directory.file("state")
        func snapshot() throws -> [String: String] {
            var files: [String: String] = [:]
            for name in try FileManager.default.contentsOfDirectory(atPath: state) {
                var st = stat()
                guard stat("\(state)/\(name)", &st) == 0 else { throw TestFailure("stat \(name)") }
                files[name] = "\(st.st_ino) \(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec) \(st.st_size)"
            }
            return files
        }
        let before = try snapshot()
        for _ in 0..<2 {
            guard case .serviceLogin = try login(sdk, enrolment.idmIdentifier, pin: "24680").0 else {
                throw TestFailure("expected serviceLogin")
            }
        }
        #expect(try snapshot() == before)
    }

    @Test func aWrongPINLocksAndTheSameRequestCanBeSignedAgainAfterTheLock() throws {
        let fixture = try Fixture()
        let (sdk, enrolment) = try enrolled(fixture)
        let (result, _) = try login(sdk, enrolment.idmIdentifier, pin: "13570")
        guard case .lockout(let lock, let information) = result else {
            Issue.record("expected lockout")
            return
        }
        #expect(!lock.isPermanent)
        #expect(lock.failedAttempts == 1)
        // While the lock holds, the manager refuses to start (the remembered lock only makes the machine ask).
        let refusal = #expect(throws: XignSdkError.self) {
            _ = try sdk.authenticator.startAuthenticationSynchronous(
                data: try sdk.authenticator.fetchInAppAuthenticationInitializationData(
                    idmIdentifier: enrolment.idmIdentifier, service: "pam", host: "h", localUser: "alice"))
        }
        #expect(refusal?.errorCode == .lockedOut && refusal?.lockout != nil)
        // The signatures were spent: finishing unsigned is refused here, before any request.
        #expect(throws: XignSdkError.self) {
            _ = try sdk.authenticator.finishAuthenticationSynchronous(userInfo: information)
        }
        Thread.sleep(until: lock.lockedUntil.addingTimeInterval(0.05))
        try information.sign(factor: DeviceFactor())
        try information.sign(factor: PinFactor("24680"))
        guard case .serviceLogin = try sdk.authenticator.finishAuthenticationSynchronous(userInfo: information) else {
            Issue.record("expected serviceLogin after the lock")
            return
        }
    }

    @Test func wrongPINsDuringLoginEndInAPermanentLock() throws {
        let fixture = try Fixture()
        let (sdk, enrolment) = try enrolled(fixture)
        var last: LockoutAttemptInformation?
        for _ in 1...4 {
            if let until = last?.lockedUntil { Thread.sleep(until: until.addingTimeInterval(0.05)) }
            guard case .lockout(let lock, _) = try login(sdk, enrolment.idmIdentifier, pin: "11112").0 else {
                Issue.record("expected lockout")
                return
            }
            last = lock
        }
        #expect(last?.isPermanent == true)
        do {
            _ = try login(
                try fixture.sdk(stateDirectory: fixture.directory.file("state")), enrolment.idmIdentifier, pin: "24680")
            Issue.record("a permanent lock let the right PIN in")
        } catch let error as XignSdkError where error.lockout != nil {
            #expect(error.lockout?.isPermanent == true)
        }
    }

    @Test func tokensForAnotherHostOrUserAndReplayedOrForgedTokensAreRefused() throws {
        let fixture = try Fixture()
        let (sdk, enrolment) = try enrolled(fixture)
        let realKey = try P256PrivateKey(
            pemRepresentation: String(
                contentsOfFile: fixture.manager.dataDirectory + "/signing-key.pem", encoding: .utf8))
        // The login carries the enrolment it read at its start, so each case reads it after pointing it elsewhere.
        func data() throws -> AuthenticationInitializationData {
            try sdk.authenticator.fetchInAppAuthenticationInitializationData(
                idmIdentifier: enrolment.idmIdentifier, service: "pam", host: "host-a", localUser: "alice")
        }
        @Sendable func token(
            host: String = "host-a", user: String = "alice", nonce: String, signer: P256PrivateKey
        ) throws -> [UInt8] {
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let message = LoginTokenMessage(
                nonce: nonce, subject: "auth@example.org", deviceId: enrolment.idmIdentifier,
                activationId: enrolment.entity.activationId,
                service: "pam", role: "login", host: host, localUser: user, attributes: [:], issuedAt: now,
                expiresAt: now + 60_000)
            let header = JWS.Header(typ: SignedAnswerType.loginToken, kid: realKey.publicKey.fingerprint)
            return FaultyServer.http(
                contentType: "application/jose",
                body: Array(try JWS.sign(payload: JSONEncoder().encode(message), header: header, with: signer).utf8))
        }
        @Sendable func nonce(_ request: String) -> String {
            (try? JSONDecoder().decode(
                TokenRequest.self, from: Data(request[request.range(of: "\r\n\r\n")!.upperBound...].utf8)
            ).nonce) ?? ""
        }
        let attacker = try P256PrivateKey()
        let cases: [(String, @Sendable (String) -> [UInt8]?)] = [
            ("another host", { try? token(host: "host-b", nonce: nonce($0), signer: realKey) }),
            ("another user", { try? token(user: "root", nonce: nonce($0), signer: realKey) }),
            ("replayed", { _ in try? token(nonce: "an-old-nonce", signer: realKey) }),
            ("forged", { try? token(nonce: nonce($0), signer: attacker) }),
        ]
        // The token endpoint answers from a responder that signs what it likes; the enrolment points there.
        let storePath = fixture.directory.file("state/identity-managers.json")
        let original = try String(contentsOfFile: storePath, encoding: .utf8)
        for (name, respond) in cases {
            let server = try FaultyServer(respond: respond)
            try writeTestFile(
                storePath,
                Data(original.replacingOccurrences(of: fixture.manager.url.description, with: server.url).utf8))
            do {
                _ = try sdk.authenticator.fetchToken(
                    AuthorizationCode(code: "c", idmIdentifier: enrolment.idmIdentifier), expecting: data())
                Issue.record("accepted a token: \(name)")
            } catch let error as XignSdkError {
                #expect(error.errorCode == .managerSignatureInvalid, "\(name): \(error)")
            }
        }
        // The honest token from the same responder shape is accepted, so the refusals above are for the reasons named.
        let honest = try FaultyServer { try? token(nonce: nonce($0), signer: realKey) }
        try writeTestFile(
            storePath, Data(original.replacingOccurrences(of: fixture.manager.url.description, with: honest.url).utf8))
        #expect(
            try sdk.authenticator.fetchToken(
                AuthorizationCode(code: "c", idmIdentifier: enrolment.idmIdentifier), expecting: data()
            ).host == "host-a"
        )
    }

    @Test func requestedAttributesAreConfirmedAndMissingDataIsAskedFor() throws {
        let config = ManagerProcess.testConfig(pamService: "roles = login", "attributes = email!, givenName!")
        let fixture = try Fixture(managerConfig: config)
        let (sdk, enrolment) = try enrolled(fixture)
        let authenticator = sdk.authenticator
        let data = try authenticator.fetchInAppAuthenticationInitializationData(
            idmIdentifier: enrolment.idmIdentifier, service: "pam", host: "h", localUser: "alice")
        let request = try authenticator.startAuthenticationSynchronous(data: data)
        let email = try #require(request.info.email)
        let given = try #require(request.info.givenName)
        #expect(!email.isDataMissing && email.aliases.count == 1 && email.selection != nil)
        #expect(given.isDataMissing && given.isRequired)
        guard
            case .failure(let again) = try authenticator.prepareAuthenticationUserInformationSynchronous(
                request: request)
        else {
            Issue.record("missing data was not reported")
            return
        }
        #expect(again.info.givenName?.error == .dataMissing)
        #expect(given.setValue(value: "  ") == .empty)
        #expect(given.setValue(value: "Alice") == .valid)
        guard
            case .success(let information) = try authenticator.prepareAuthenticationUserInformationSynchronous(
                request: again)
        else {
            Issue.record("attributes still refused")
            return
        }
        try information.sign(factor: DeviceFactor())
        try information.sign(factor: PinFactor("24680"))
        guard case .serviceLogin(let login) = try authenticator.finishAuthenticationSynchronous(userInfo: information)
        else {
            Issue.record("expected serviceLogin")
            return
        }
        let token = try authenticator.fetchToken(try authenticator.fetchAuthorizationCode(login), expecting: data)
        #expect(token.attributes == ["email": "auth@example.org", "givenName": "Alice"])
    }

    @Test func factorsThatAreNotEnrolledOrIncompleteAreRefused() throws {
        let fixture = try Fixture()
        let (sdk, enrolment) = try enrolled(fixture)
        let authenticator = sdk.authenticator
        let request = try authenticator.startAuthenticationSynchronous(
            data: try sdk.authenticator.fetchInAppAuthenticationInitializationData(
                idmIdentifier: enrolment.idmIdentifier, service: "pam", host: "h", localUser: "alice"))
        #expect(request.roles.map(\.name) == ["login", "sudo"])
        #expect(request.roles.allSatisfy { $0.requestedAuthenticators == [[.device, .pin]] })
        #expect(request.selection == nil, "two roles: the caller chooses")
        #expect(throws: XignSdkError.self) {
            _ = try authenticator.prepareAuthenticationUserInformationSynchronous(request: request)
        }
        request.setSelection(request.roles[0])
        guard
            case .success(let information) = try authenticator.prepareAuthenticationUserInformationSynchronous(
                request: request)
        else {
            Issue.record("expected success")
            return
        }
        do {
            try information.sign(factor: BiometricFactor())
            Issue.record("signed with a biometric factor that is not enrolled")
        } catch let error as XignSdkError {
            #expect(error.message.contains("no biometric factor enrolled"))
        }
        try information.sign(factor: DeviceFactor())
        #expect(throws: XignSdkError.self) {
            _ = try authenticator.finishAuthenticationSynchronous(userInfo: information)
        }
    }

    @Test func unknownServicesRemovedDevicesAndSoftwareKeysWhereTPMIsRequiredAreRefused() throws {
        let fixture = try Fixture()
        let (sdk, enrolment) = try enrolled(fixture)
        func start(_ service: String = "pam", _ sdk: XignSdk) -> XignSdkError? {
            do {
                _ = try sdk.authenticator.startAuthenticationSynchronous(
                    data: try sdk.authenticator.fetchInAppAuthenticationInitializationData(
                        idmIdentifier: enrolment.idmIdentifier, service: service, host: "h", localUser: "alice"))
                return nil
            } catch let error as XignSdkError {
                return error
            } catch {
                return nil
            }
        }
        #expect(start("ssh", sdk)?.message.contains("no service 'ssh'") == true)
        // The same enrolment at a manager that now requires hardware keys.
        fixture.manager.stop()
        try writeTestFile(
            fixture.manager.configPath,
            Data((ManagerProcess.testConfig + "\n[policy]\nrequire_hardware_key = true\n").utf8))
        try fixture.manager.start()
        let storePath = fixture.directory.file("state/identity-managers.json")
        let stored = try String(contentsOfFile: storePath, encoding: .utf8)
        try writeTestFile(
            storePath,
            Data(
                stored.replacingOccurrences(
                    of: enrolment.entity.managerURL.description, with: fixture.manager.url.description
                ).utf8))
        #expect(start("pam", sdk)?.errorCode == .securityInsufficient)
    }
}
