import Foundation
import HTTPTypes
import NIOFoundationCompat
import Testing
import XignCore
import XignCrypto
import XignProtocol
import XignTestSupport

@Suite struct ManagerAPITests {
    @Test(arguments: TestDatabase.allCases) func healthAndParametersMatchTheSpec(database: TestDatabase) async throws {
        try await InProcessManager.run(database: database) { inProcess in
            let api = inProcess.api
            let health = try await api.call("GET", APIPath.health)
            #expect(health.json["managerKeyFingerprint"] as? String == (try api.managerKey.fingerprint))
            let parameters = try await api.call("GET", APIPath.registrationParameters)
            #expect((parameters.json["pinSpec"] as? [String: Any])?["minLength"] as? Int == 5)
            // An unknown service mapping id is not echoed: attributes for it would be dropped.
            #expect(
                try await api.call("GET", APIPath.registrationParameters, query: "?serviceMappingId=nope").json[
                    "serviceMappingId"] == nil)
            // What the spec refuses the manager refuses too (schemathesis found this one): printable ASCII only.
            let nonASCII = try await api.call("GET", APIPath.registrationParameters, query: "?serviceMappingId=%C2%84")
            #expect(nonASCII.status == 400)
            #expect(nonASCII.errorCode == "badRequest")
        }
    }

    /// A PIN in the clear is refused before it is looked at, and so is one sealed for another request or another
    /// manager; the same request sealed as the client seals it goes through.
    @Test func aPINInTheClearOrSealedForAnotherRequestIsRefused() async throws {
        try await InProcessManager.run { inProcess in
            let api = inProcess.api
            let clear = try await api.post(
                APIPath.registrations,
                json: #"{"categoryId":"email","pin":"24680","attributes":{"email":"clear@example.org"}}"#)
            #expect(clear.status == 400 && clear.errorCode == "securityInsufficient", "\(clear.json)")
            #expect((clear.error["message"] as? String)?.contains("update xign") == true)
            let otherManager = try SealedPINMessage(
                sealing: "24680", to: P256PrivateKey().publicKey, for: .registration(categoryId: "email"))
            let elsewhere = try await api.post(
                APIPath.registrations,
                RegisterRequest(
                    categoryId: "email", sealedPin: otherManager, attributes: ["email": "elsewhere@example.org"],
                    alias: nil, serviceMappingId: nil,
                    arbitraryUserAttributes: nil))
            #expect(
                elsewhere.status == 400 && (elsewhere.error["message"] as? String)?.contains("does not open") == true)
            #expect(try await api.postRegistration("sealed@example.org").status == 201, "the control")

            let payload = try await api.register("decrypt@example.org")
            let moved = try await api.post(
                APIPath.personalizationDecrypt,
                DecryptRequest(
                    activationId: payload.activationId, activationSecret: payload.activationSecret,
                    sealedPin: try api.sealed(
                        "24680", for: .decrypt(activationId: payload.activationId, nonce: "first")),
                    nonce: "second",
                    knownDeviceIds: []))
            #expect(moved.status == 400, "a seal is bound to its nonce: \(moved.json)")
            var body =
                try JSONSerialization.jsonObject(
                    with: JSONEncoder.canonical.encode(
                        DecryptRequest(
                            activationId: payload.activationId, activationSecret: payload.activationSecret,
                            sealedPin: try api.sealed(
                                "24680", for: .decrypt(activationId: payload.activationId, nonce: "n")), nonce: "n",
                            knownDeviceIds: []))) as! [String: Any]
            body["pin"] = "24680"
            #expect(
                try await api.call(
                    "POST", APIPath.personalizationDecrypt, body: JSONSerialization.data(withJSONObject: body)
                )
                .errorCode
                    == "securityInsufficient")
            #expect(
                try api.manager.query("SELECT failed_attempts FROM activations WHERE id = '\(payload.activationId)'")
                    == [
                        "0"
                    ], "no attempt spent")
            #expect(try await api.decrypt(payload, pin: "24680").status == 200, "the control")

            // Signed right, sealed for another challenge: the seal does not open, and nothing counts as a wrong PIN.
            let device = try await api.enrolDevice("finish@example.org")
            let started = try await api.startAuthentication(device)
            let (id, challenge) = (started["authenticationId"] as? String ?? "", started["challenge"] as? String ?? "")
            let request = AuthenticationFinishRequest(
                authenticationId: id, role: "login", factors: [.device, .pin],
                sealedPin: try api.sealed("24680", for: .authentication(id: id, challenge: "another challenge")),
                attributeValues: [:],
                attributeSelections: [:], nonce: "f")
            let finishBody = try JSONEncoder.canonical.encode(request)
            let signature = try device.key.signature(
                for: SignedRequest.canonicalMessage(
                    method: "POST", path: APIPath.authenticationFinish, body: finishBody, challenge: challenge))
            let sealedForOther = try await api.call(
                "POST", APIPath.authenticationFinish, body: finishBody,
                headers: [(SignedRequest.signatureHeader, Base64URL.encode(signature))])
            #expect(
                sealedForOther.status == 400
                    && (sealedForOther.error["message"] as? String)?.contains("does not open") == true)
            #expect(try await api.authenticate(device, pin: "24680").status == 200, "the control")
        }
    }

    @Test(arguments: TestDatabase.allCases) func registrationReportsEveryAttributeThatIsWrong(
        database: TestDatabase
    ) async throws {
        try await InProcessManager.run(database: database) { inProcess in
            let api = inProcess.api
            _ = try await api.register("taken@example.org")
            let taken = try await api.post(
                APIPath.registrations,
                json:
                    #"{"categoryId":"email","sealedPin":\#(try api.sealedRegistrationPIN("24680")),"attributes":{"email":"TAKEN@example.org"}}"#
            )
            #expect(taken.status == 422)
            #expect(taken.errorCode == "registrationRejected")
            #expect(taken.error["attributes"] as? [String: String] == ["email": "notAvailable"])
            let bad = try await api.post(
                APIPath.registrations,
                json:
                    #"{"categoryId":"email","sealedPin":\#(try api.sealedRegistrationPIN("12345")),"attributes":{"email":"nope","givenName":"  ","shoeSize":"44"},"alias":""}"#
            )
            #expect(
                bad.error["attributes"] as? [String: String] == [
                    "email": "invalid", "givenName": "invalid", "shoeSize": "invalid", "pin": "invalid",
                    "alias": "invalid",
                ])
            #expect(bad.error["pinError"] as? String == "blacklisted")
            let missing = try await api.post(
                APIPath.registrations,
                json: #"{"categoryId":"email","sealedPin":\#(try api.sealedRegistrationPIN("24680")),"attributes":{}}"#)
            #expect(missing.error["attributes"] as? [String: String] == ["email": "required"])
            #expect(
                try await api.post(
                    APIPath.registrations,
                    json:
                        #"{"categoryId":"phone","sealedPin":\#(try api.sealedRegistrationPIN("24680")),"attributes":{}}"#
                ).status == 400)
            // Free text takes any script but no control character; ids are printable ASCII.
            let text = try await api.post(
                APIPath.registrations,
                json:
                    #"{"categoryId":"email","sealedPin":\#(try api.sealedRegistrationPIN("24680")),"attributes":{"email":"j\u00fcrgen@example.org","givenName":"J\u00fcrgen\u0085"},"alias":"Jos\u00e9"}"#
            )
            #expect(text.error["attributes"] as? [String: String] == ["givenName": "invalid"])
            // Refused where the request is decoded (RegisterRequest.checkLimits), with the field named.
            for (body, field) in [
                (
                    #"{"categoryId":"email","sealedPin":\#(try api.sealedRegistrationPIN("24680")),"attributes":{"email":"x@example.org"},"arbitraryUserAttributes":{"k":"v\u202e"}}"#,
                    "arbitraryUserAttributes[k]"
                ),
                (
                    #"{"categoryId":"email","sealedPin":\#(try api.sealedRegistrationPIN("24680")),"attributes":{"email":"x@example.org"},"serviceMappingId":"port\u00e4l"}"#,
                    "serviceMappingId"
                ),
            ] {
                let refused = try await api.post(APIPath.registrations, json: body)
                #expect(
                    refused.status == 400 && (refused.error["message"] as? String)?.contains(field) == true,
                    "\(body): \(refused.error)")
            }
            #expect(try await api.post(APIPath.registrations, json: "{not json").errorCode == "badRequest")
            let huge = try await api.post(
                APIPath.registrations, json: "{\"pad\":\"" + String(repeating: "x", count: 20_000) + "\"}")
            #expect(huge.status == 413)
            #expect(huge.errorCode == "payloadTooLarge")
        }
    }

    @Test(arguments: TestDatabase.allCases) func aLoginNameIsCheckedAndUniqueAtRegistrationAndByTheAdministrator(
        database: TestDatabase
    ) async throws {
        try await InProcessManager.run(
            config: ManagerProcess.testConfig
                + "\n[registration]\ncategories = email\ncategory.email.attributes = email!, loginName\n",
            database: database
        ) { inProcess in
            let api = inProcess.api
            #expect(
                try await api.post(
                    APIPath.registrations,
                    json:
                        #"{"categoryId":"email","sealedPin":\#(try api.sealedRegistrationPIN("24680")),"attributes":{"email":"a@example.org","loginName":"alice"}}"#
                ).status == 201)
            // A registrant only asks: no login name until the administrator gives one, and a system account's is refused.
            // H5: and names of groups packages make or cloud images' first users, which a host would take for its own.
            for name in ["root", "systemd-network", "_apt", "docker", "ubuntu", "ec2-user", "pi", "vagrant"] {
                let system = try await api.post(
                    APIPath.registrations,
                    json:
                        #"{"categoryId":"email","sealedPin":\#(try api.sealedRegistrationPIN("24680")),"attributes":{"email":"r@example.org","loginName":"\#(name)"}}"#
                )
                #expect(system.error["attributes"] as? [String: String] == ["loginName": "invalid"], "\(name)")
            }
            let listed =
                try JSONSerialization.jsonObject(with: Data(try api.manager.admin(["accounts", "--json"]).stdout.utf8))
                as? [[String: Any]]
            #expect(
                listed?.first?["loginName"] == nil && listed?.first?["requestedLoginName"] as? String == "alice",
                "\(listed ?? [])")
            for name in ["root", "docker", "sudo", "ubuntu"] {
                #expect(
                    try api.manager.admin(["accounts", "set-login", "a@example.org", name]).stderr.contains(
                        "is reserved"), "\(name)")
            }
            #expect(
                try api.manager.admin(["accounts", "set-login", "a@example.org", "alice"]).status == 0,
                "honest control: an ordinary name is given")
            let taken = try await api.post(
                APIPath.registrations,
                json:
                    #"{"categoryId":"email","sealedPin":\#(try api.sealedRegistrationPIN("24680")),"attributes":{"email":"b@example.org","loginName":"alice"}}"#
            )
            #expect(taken.error["attributes"] as? [String: String] == ["loginName": "notAvailable"])
            let bad = try await api.post(
                APIPath.registrations,
                json:
                    #"{"categoryId":"email","sealedPin":\#(try api.sealedRegistrationPIN("24680")),"attributes":{"email":"b@example.org","loginName":"Root; rm"}}"#
            )
            #expect(bad.error["attributes"] as? [String: String] == ["loginName": "invalid"])
            func accounts() async throws -> [String: String] {
                let list =
                    try JSONSerialization.jsonObject(
                        with: Data(try api.manager.admin(["accounts", "--json"]).stdout.utf8))
                    as? [[String: Any]] ?? []
                return Dictionary(
                    uniqueKeysWithValues: list.map { ($0["email"] as? String ?? "", $0["loginName"] as? String ?? "-") }
                )
            }
            await #expect(try accounts() == ["a@example.org": "alice"])
            _ = try await api.register("b@example.org")
            #expect(try api.manager.admin(["accounts", "set-login", "b@example.org", "bob"]).status == 0)
            let duplicate = try api.manager.admin(["accounts", "set-login", "b@example.org", "alice"])
            #expect(
                duplicate.status != 0 && duplicate.stderr.contains("another account has the login name alice"),
                "\(duplicate.stderr)")
            #expect(
                try api.manager.admin(["accounts", "set-login", "b@example.org", "Bob!"]).stderr.contains(
                    "is not a login name"))
            #expect(
                try api.manager.admin(["accounts", "set-login", "nobody@example.org", "carol"]).stderr.contains(
                    "no account"))
            await #expect(try accounts() == ["a@example.org": "alice", "b@example.org": "bob"])
            #expect(try api.manager.admin(["accounts", "set-login", "a@example.org", "--clear"]).status == 0)
            await #expect(try accounts() == ["a@example.org": "-", "b@example.org": "bob"])
        }
    }

    @Test(arguments: TestDatabase.allCases) func blockedDomainsAreNotAvailable(database: TestDatabase) async throws {
        try await InProcessManager.run(
            config: ManagerProcess.testConfig + "\n[registration]\nblocked_domains = spam.example\n", database: database
        ) { inProcess in
            let api = inProcess.api
            let blocked = try await api.post(
                APIPath.registrations,
                json:
                    #"{"categoryId":"email","sealedPin":\#(try api.sealedRegistrationPIN("24680")),"attributes":{"email":"x@SPAM.example"}}"#
            )
            #expect(blocked.error["attributes"] as? [String: String] == ["email": "notAvailable"])
            #expect(
                try await api.post(
                    APIPath.registrations,
                    json:
                        #"{"categoryId":"email","sealedPin":\#(try api.sealedRegistrationPIN("24680")),"attributes":{"email":"x@fine.example"}}"#
                ).status == 201)
        }
    }

    @Test(arguments: TestDatabase.allCases) func personalizationRequiresTheDeviceSignatureAndIsSingleUse(
        database: TestDatabase
    ) async throws {
        try await InProcessManager.run(database: database) { inProcess in
            let api = inProcess.api
            let payload = try await api.register("signed@example.org")
            let key = try api.managerKey
            let decrypted = try await api.decrypt(payload, pin: "24680", nonce: "n1")
            let result = try decrypted.signedPayload(key: key, type: SignedAnswerType.decrypt)
            #expect(result["outcome"] as? String == "newPersonalization")
            #expect(result["nonce"] as? String == "n1")
            let session = try #require(result["session"] as? [String: Any])
            let device = try P256PrivateKey()
            let (body, signature) = try api.signedPersonalization(session: session, key: device)

            #expect(try await api.call("POST", APIPath.personalizations, body: body).errorCode == "signatureInvalid")
            let (_, forged) = try api.signedPersonalization(session: session, key: device, signWith: P256PrivateKey())
            #expect(
                try await api.call(
                    "POST", APIPath.personalizations, body: body, headers: [(SignedRequest.signatureHeader, forged)]
                ).status == 401)
            var tampered = body
            tampered[tampered.count - 2] = UInt8(ascii: "X")
            #expect(
                try await api.call(
                    "POST", APIPath.personalizations, body: tampered,
                    headers: [(SignedRequest.signatureHeader, signature)]
                ).status != 200)

            let accepted = try await api.call(
                "POST", APIPath.personalizations, body: body, headers: [(SignedRequest.signatureHeader, signature)])
            #expect(accepted.status == 200)
            #expect(
                try accepted.signedPayload(key: key, type: SignedAnswerType.personalization)["deviceKey"] as? String
                    == Base64URL.encode(device.publicKey.derRepresentation))
            let replay = try await api.call(
                "POST", APIPath.personalizations, body: body, headers: [(SignedRequest.signatureHeader, signature)])
            #expect(replay.status == 409)
            #expect(replay.errorCode == "sessionInvalid")
        }
    }

    @Test(arguments: TestDatabase.allCases) func aLockedActivationIsNotEvenAskedThePIN(
        database: TestDatabase
    ) async throws {
        try await InProcessManager.run(
            config: ManagerProcess.testConfig(firstLock: "1h"),
            database: database
        ) { inProcess in
            let api = inProcess.api
            let payload = try await api.register("lock@example.org")
            let wrong = try await api.decrypt(payload, pin: "13570").signedPayload(
                key: try api.managerKey, type: SignedAnswerType.decrypt)
            let lock = try #require(wrong["lockout"] as? [String: Any])
            #expect(lock["failedAttempts"] as? Int == 1)
            // During the lock even the right PIN is refused unchecked, and the refusal does not count as a guess.
            let refused = try await api.decrypt(payload, pin: "24680")
            #expect(refused.status == 423)
            #expect(refused.errorCode == "lockedOut")
            #expect((refused.error["lockout"] as? [String: Any])?["failedAttempts"] as? Int == 1)
            #expect(try await api.call("POST", APIPath.personalizationDecrypt, body: Data("[]".utf8)).status == 400)
        }
    }

    static let hardwareKeysOnly = ManagerFiles.testConfig + "\n[policy]\nrequire_hardware_key = true\n"

    @Test(arguments: TestDatabase.allCases) func softwareKeysAreRefusedWhereHardwareKeysAreRequired(
        database: TestDatabase
    ) async throws {
        try await InProcessManager.run(config: Self.hardwareKeysOnly, database: database) { inProcess in
            let api = inProcess.api
            let payload = try await api.register("hw@example.org")
            let result = try await api.decrypt(payload, pin: "24680").signedPayload(
                key: try api.managerKey, type: SignedAnswerType.decrypt)
            let session = try #require(result["session"] as? [String: Any])
            let (body, signature) = try api.signedPersonalization(session: session, key: P256PrivateKey())
            let refused = try await api.call(
                "POST", APIPath.personalizations, body: body, headers: [(SignedRequest.signatureHeader, signature)])
            #expect(refused.status == 403)
            #expect(refused.errorCode == "securityInsufficient")
        }
    }

    /// The client raises XignSdkError securityInsufficient for that refusal, with what to do.
    @Test(.machineShare) func theClientNamesTheRefusalOfASoftwareKey() async throws {
        let api = API(manager: try ManagerProcess(config: Self.hardwareKeysOnly))
        let sdk = try api.sdk()
        let data = PersonalizationInitializationData(payload: try await api.register("hw2@example.org"))
        let personalizer = sdk.personalizer()
        guard
            case .newPersonalization(let parameters) =
                try personalizer.decryptPersonalizationInitializationDataSynchronous(data: data, pin: "24680")
        else {
            Issue.record("expected newPersonalization")
            return
        }
        let refusal = #expect(throws: XignSdkError.self) {
            try personalizer.personalizeIdentityManagerSynchronous(parameters: parameters)
        }
        #expect(refusal?.errorCode == .securityInsufficient)
    }

    @Test(arguments: TestDatabase.allCases) func challengesAndRevocationAreDeviceSignedAndSingleUse(
        database: TestDatabase
    ) async throws {
        try await InProcessManager.run(database: database) { inProcess in
            let api = inProcess.api
            let payload = try await api.register("revoke@example.org")
            let result = try await api.decrypt(payload, pin: "24680").signedPayload(
                key: try api.managerKey, type: SignedAnswerType.decrypt)
            let device = try P256PrivateKey()
            let (body, signature) = try api.signedPersonalization(
                session: try #require(result["session"] as? [String: Any]), key: device)
            let personalized = try await api.call(
                "POST", APIPath.personalizations, body: body, headers: [(SignedRequest.signatureHeader, signature)])
            let deviceId = try #require(
                try personalized.signedPayload(key: try api.managerKey, type: SignedAnswerType.personalization)[
                    "deviceId"]
                    as? String)

            #expect(
                try await api.post(APIPath.challenges, ChallengeRequest(deviceId: "0123456789abcdef0123456789abcdef"))
                    .status
                    == 404)
            let challenge = try #require(
                try await api.post(APIPath.challenges, ChallengeRequest(deviceId: deviceId)).json["challenge"]
                    as? String)
            let revoke = try JSONEncoder.canonical.encode(
                RevokeRequest(deviceId: deviceId, challenge: challenge, nonce: "rn"))
            let message = SignedRequest.canonicalMessage(
                method: "POST", path: APIPath.deviceRevocations, body: revoke, challenge: challenge)
            let wrongKey = Base64URL.encode(try P256PrivateKey().signature(for: message))
            #expect(
                try await api.call(
                    "POST", APIPath.deviceRevocations, body: revoke,
                    headers: [(SignedRequest.signatureHeader, wrongKey)]
                ).status == 401)
            let good = Base64URL.encode(try device.signature(for: message))
            let revoked = try await api.call(
                "POST", APIPath.deviceRevocations, body: revoke, headers: [(SignedRequest.signatureHeader, good)])
            #expect(revoked.status == 200)
            #expect(
                try await api.call(
                    "POST", APIPath.deviceRevocations, body: revoke, headers: [(SignedRequest.signatureHeader, good)]
                ).status == 404)
            #expect(try await api.decrypt(payload, pin: "24680").errorCode == "activationRevoked")
        }
    }

    @Test func anUnknownRouteIsA404InTheAPIsShape() async throws {
        try await InProcessManager.run { manager in
            let unknown = try await manager.execute(.get, "/v1/nope")
            #expect(unknown.status == .notFound)
            #expect(try JSONDecoder().decode(ErrorBody.self, from: Data(buffer: unknown.body)).error.code == .notFound)
            #expect(!manager.log.contains("request failed"), "a client's mistake is not the manager's error")
        }
    }

    @Test(.machineShare) func aTLSKeyOtherUsersCanReadIsRefused() async throws {
        let directory = TemporaryDirectory()
        let certificates = try TestCertificates(in: directory)
        chmod(certificates.valid.key, 0o640)
        let config =
            ManagerProcess.testConfig
            + "\n[server]\ntls_certificate = \(certificates.valid.certificate)\ntls_key = \(certificates.valid.key)\n"
        #expect { try ManagerProcess(config: config) } throws: {
            "\($0)".contains("is readable by other users; chmod 0600 it")
        }
    }

    /// duo_unix #391: the manager's TLS never agrees to an anonymous cipher (TLS 1.2's aNULL; 1.3 has none), so it
    /// always proves itself with its certificate. Controls: the same anonymous client completes a handshake with a
    /// server that offers one, and a client with the manager's CA completes and verifies the handshake.
    @Test func theManagersTLSRefusesAnonymousCiphers() async throws {
        let directory = TemporaryDirectory()
        let certificates = try TestCertificates(in: directory)
        let config =
            ManagerProcess.testConfig
            + "\n[server]\ntls_certificate = \(certificates.valid.certificate)\ntls_key = \(certificates.valid.key)\n"
        let manager = try ManagerProcess(config: config)
        func client(_ port: Int, _ arguments: [String]) throws -> ChildProcess.Result {
            try ChildProcess(
                "/usr/bin/openssl",
                ["s_client", "-connect", "127.0.0.1:\(port)", "-servername", "localhost"] + arguments,
                in: directory
            ).wait()
        }
        let anonymousClient = ["-tls1_2", "-cipher", "aNULL:@SECLEVEL=0"]
        let refused = try client(manager.port, anonymousClient)
        #expect(refused.status != 0, "\(refused.stdout)")
        #expect(!refused.stdout.contains("Cipher is ADH"), "\(refused.stdout)")
        let anonymousServer = try AnonymousTLSServer()
        let anonymous = try client(anonymousServer.port, anonymousClient)
        #expect(anonymous.stdout.contains("Cipher is ADH"), "control: \(anonymous.stdout)\(anonymous.stderr)")
        let verified = try client(manager.port, ["-CAfile", certificates.caFile, "-verify_return_error"])
        #expect(verified.status == 0, "\(verified.stderr)")
        #expect(verified.stdout.contains("Verify return code: 0 (ok)"), "\(verified.stdout)")
    }

    @Test(.machineShare) func secretsAndDataArePrivateFiles() async throws {
        let manager = try ManagerProcess()
        _ = try await API(manager: manager).register("files@example.org")
        for file in ["signing-key.pem", "pin-sealing-key.pem", "pin-pepper", "manager.sqlite"] {
            let mode =
                try FileManager.default.attributesOfItem(atPath: manager.dataDirectory + "/" + file)[.posixPermissions]
                as? Int
            #expect(mode == 0o600, "\(file) has mode \(String(mode ?? 0, radix: 8))")
        }
        for mail in try manager.mails() {
            #expect(try FileManager.default.attributesOfItem(atPath: mail)[.posixPermissions] as? Int == 0o600)
        }
    }

    @Test(arguments: TestDatabase.allCases) func authenticationStartFinishAndTokenMatchTheSpecAndAreSingleUse(
        database: TestDatabase
    ) async throws {
        // A lock of 3 s, not the test config's 300 ms: the check that the lock refuses a start must come before it
        // ends, also on a loaded machine.
        let config = ManagerFiles.testConfig(firstLock: "3s")
        try await InProcessManager.run(config: config, database: database) { inProcess in
            let api = inProcess.api
            let payload = try await api.register("login@example.org")
            let key = try api.managerKey
            let result = try await api.decrypt(payload, pin: "24680").signedPayload(
                key: key, type: SignedAnswerType.decrypt)
            let device = try P256PrivateKey()
            let (body, signature) = try api.signedPersonalization(
                session: try #require(result["session"] as? [String: Any]), key: device)
            let personalized = try await api.call(
                "POST", APIPath.personalizations, body: body, headers: [(SignedRequest.signatureHeader, signature)])
            let deviceId = try #require(
                try personalized.signedPayload(key: key, type: SignedAnswerType.personalization)["deviceId"] as? String)

            func start() async throws -> [String: Any] { try await api.startAuthentication((deviceId, device)) }
            func finish(_ started: [String: Any], pin: String, signer: P256PrivateKey? = nil) async throws -> APIAnswer
            {
                try await api.finishAuthentication(started, pin: pin, signer: signer ?? device)
            }
            #expect(try await api.postStart((deviceId, device), purpose: .login(service: "nope")).status == 404)
            // The start is device-signed: unsigned, or signed by another key, it is refused before anything is looked at.
            #expect(try await api.postStart((deviceId, device), signer: .some(nil)).errorCode == "signatureInvalid")
            #expect(
                try await api.postStart((deviceId, device), signer: try P256PrivateKey()).errorCode
                    == "signatureInvalid")
            let first = try await start()
            await #expect(try finish(first, pin: "24680", signer: P256PrivateKey()).errorCode == "signatureInvalid")
            let wrong = try await finish(first, pin: "13570").signedPayload(
                key: key, type: SignedAnswerType.authenticationResult)
            #expect(wrong["outcome"] as? String == "lockout")
            #expect(wrong["nextChallenge"] is String)
            #expect(try await api.postStart((deviceId, device)).status == 423)
            let lock = try #require(wrong["lockout"] as? [String: Any])
            try await sleep(pastEpochMilliseconds: (lock["lockedUntil"] as? Double ?? 0))

            let second = try await start()
            let accepted = try await finish(second, pin: "24680")
            let login = try #require(
                try accepted.signedPayload(key: key, type: SignedAnswerType.authenticationResult)["serviceLogin"]
                    as? [String: Any])
            await #expect(
                try finish(second, pin: "24680").status == 409, "a finished authentication cannot be finished again")
            let code = try #require(login["authorizationCode"] as? String)
            let token = try await api.post(APIPath.token, TokenRequest(authorizationCode: code, nonce: "t"))
                .signedPayload(
                    key: key, type: SignedAnswerType.loginToken)
            #expect(token["host"] as? String == "h")
            #expect(token["localUser"] as? String == "u")
            #expect(token["nonce"] as? String == "t")
            #expect(
                try await api.post(APIPath.token, TokenRequest(authorizationCode: code, nonce: "t")).errorCode
                    == "challengeInvalid")
        }
    }

    /// A finish that gives a token nonce gets the login token with its answer, signed for that nonce, and no code: the
    /// round trip to /v1/token is saved and nothing is left that a second token could be bought with.
    @Test(arguments: TestDatabase.allCases) func aLoginTokenComesWithTheFinishWhenAskedFor(
        database: TestDatabase
    ) async throws {
        try await InProcessManager.run(database: database) { inProcess in
            let api = inProcess.api
            let key = try api.managerKey
            let device = try await api.enrolDevice("inline@example.org")
            let started = try await api.startAuthentication(device)
            let answer = try await api.finishAuthentication(
                started, pin: "24680", signer: device.key, tokenNonce: "token-nonce"
            )
            .signedPayload(key: key, type: SignedAnswerType.authenticationResult)
            let login = try #require(answer["serviceLogin"] as? [String: Any])
            #expect(login["authorizationCode"] == nil, "no code when the token came along")
            let token = try APIAnswer(status: 200, body: Data(try #require(answer["loginToken"] as? String).utf8))
                .signedPayload(key: key, type: SignedAnswerType.loginToken)
            #expect(token["nonce"] as? String == "token-nonce")
            #expect(
                token["host"] as? String == "h" && token["localUser"] as? String == "u"
                    && token["deviceId"] as? String == device.id)
            #expect(token["subject"] as? String == "inline@example.org")
            // The control: the same login without a token nonce gets a code, which buys the token once.
            let other = try await api.finishAuthentication(
                try await api.startAuthentication(device), pin: "24680", signer: device.key
            )
            .signedPayload(key: key, type: SignedAnswerType.authenticationResult)
            #expect(other["loginToken"] == nil)
            let code = try #require((other["serviceLogin"] as? [String: Any])?["authorizationCode"] as? String)
            #expect(try await api.post(APIPath.token, TokenRequest(authorizationCode: code, nonce: "t")).status == 200)
            // A token nonce that is too long is refused before anything is spent.
            #expect(
                try await api.finishAuthentication(
                    try await api.startAuthentication(device), pin: "24680", signer: device.key,
                    tokenNonce: String(repeating: "n", count: 129)
                ).status == 400)
        }
    }

    @Test(arguments: TestDatabase.allCases) func anUnexpectedFailureIsLoggedAndAnsweredWithoutItsDetails(
        database: TestDatabase
    ) async throws {
        try await InProcessManager.run(database: database) { manager in
            // A database that lost a table under the running manager: the store's query fails with the database's own
            // error.
            _ = try manager.files.query("DROP TABLE account_emails")
            let body = try JSONEncoder.canonical.encode(
                RegisterRequest(
                    categoryId: "email",
                    sealedPin: try manager.api.sealed("24680", for: .registration(categoryId: "email")),
                    attributes: ["email": "x@example.org"], alias: nil,
                    serviceMappingId: nil, arbitraryUserAttributes: nil))
            let response = try await manager.execute(
                .post, APIPath.registrations, headers: [.contentType: "application/json"],
                body: String(decoding: body, as: UTF8.self))
            #expect(response.status == .internalServerError)
            let error = try JSONDecoder().decode(ErrorBody.self, from: Data(buffer: response.body)).error
            #expect(error.code == .internalError)
            #expect(!error.message.contains("account_emails"), "the details stay in the log")
            #expect(
                manager.log.contains("request failed") && manager.log.contains("account_emails"),
                "\(manager.log.suffix(500))")
        }
    }

    @Test(arguments: TestDatabase.allCases) func aHostJoinMustBeSignedByTheKeyItRegistersAndTheTokenSurvivesAForgery(
        database: TestDatabase
    ) async throws {
        try await InProcessManager.run(database: database) { inProcess in
            let api = inProcess.api
            let added = try api.manager.admin(["hosts", "add", "web1"])
            let token = try HostJoinToken(parsing: String(added.stdout.split(separator: " ").last ?? ""))
            #expect(token.managerKeyFingerprint == (try api.managerKey.fingerprint))
            let hostKey = try P256PrivateKey(), other = try P256PrivateKey()
            let body = try JSONEncoder.canonical.encode(
                HostJoinRequest(
                    joinSecret: token.secret, hostKey: Base64URL.encode(hostKey.publicKey.derRepresentation),
                    keyKind: .software, nonce: "n1"))
            func signature(_ key: P256PrivateKey) async throws -> (String, String) {
                let message = SignedRequest.canonicalMessage(
                    method: "POST", path: APIPath.hosts, body: body, challenge: token.secret)
                return (SignedRequest.signatureHeader, Base64URL.encode(try key.signature(for: message)))
            }
            let forged = try await api.call("POST", APIPath.hosts, body: body, headers: [try signature(other)])
            #expect(forged.status == 401 && forged.errorCode == "signatureInvalid")
            let unsigned = try await api.call("POST", APIPath.hosts, body: body)
            #expect(unsigned.status == 401)
            let joined = try await api.call("POST", APIPath.hosts, body: body, headers: [try signature(hostKey)])
            #expect(joined.status == 200, "the forgeries did not use the token up")
            let result = try joined.signedPayload(key: try api.managerKey, type: SignedAnswerType.hostJoin)
            #expect(result["name"] as? String == "web1" && result["nonce"] as? String == "n1")
            let replayed = try await api.call("POST", APIPath.hosts, body: body, headers: [try signature(hostKey)])
            #expect(replayed.status == 409 && replayed.errorCode == "sessionInvalid")
        }
    }

    @Test func authenticationStartsAreCountedPerDevice() async throws {
        try await InProcessManager.run(config: ManagerProcess.testConfig + "\nstarts_per_device = 3\n") { inProcess in
            let api = inProcess.api
            let (busy, other) = (
                try await api.enrolDevice("busy@example.org"), try await api.enrolDevice("other@example.org")
            )
            for _ in 0..<3 { #expect(try await api.postStart(busy).status == 200) }
            let refused = try await api.postStart(busy)
            #expect(refused.status == 429 && refused.errorCode == "tooManyRequests", "\(refused.json)")
            #expect(try await api.postStart(other).status == 200, "honest control: another device is not held up")
        }
    }

    /// H5: a host's user is the account's only with the account's uid, or where the administrator lets the account be
    /// the hosts' own user of its name; a host that says no uid is believed only then. Refused before any confirmation
    /// exists. Control: the served uid, and the administrator's yes.
    @Test(arguments: TestDatabase.allCases) func aHostsOwnUserOfTheNameIsTheAccountOnlyByItsUidOrTheAdministratorsWord(
        database: TestDatabase
    ) async throws {
        try await InProcessManager.run(database: database) { inProcess in
            let api = inProcess.api
            _ = try await api.enrolDevice("alice@example.org")
            try await inProcess.manager.administration.setLoginName("alice", email: "alice@example.org")
            try await inProcess.manager.administration.setHostGroups(["*"], email: "alice@example.org")
            let host = try await JoinedHost(api)
            for local in [JoinedHost<ManagerFiles>.LocalUser.uid(1000), .unnamed] {
                let refused = try await host.start("alice", localUser: local)
                #expect(refused.status == 403 && refused.errorCode == "localUserMismatch", "\(local): \(refused.json)")
            }
            #expect(try api.manager.query("SELECT COUNT(*) FROM confirmations") == ["0"])
            #expect(try await host.start("alice", localUser: .served).status == 200, "control: the account's own uid")
            try await inProcess.manager.administration.setMapsLocalUser(true, email: "alice@example.org")
            #expect(
                try await host.start("alice", localUser: .uid(1000)).status == 200, "control: the administrator's yes")
            #expect(
                try api.manager.query("SELECT detail FROM audit_events WHERE event = 'localUserSet'") == [
                    "hosts' own local user of its login name"
                ])
        }
    }

    @Test(arguments: TestDatabase.allCases) func aHostStartsWaitsForAndWithdrawsAConfirmationAsTheSchemaSays(
        database: TestDatabase
    ) async throws {
        try await InProcessManager.run(database: database) { inProcess in
            let api = inProcess.api
            let device = try await api.enrolDevice("alice@example.org")
            try api.manager.giveLogin("alice@example.org", "alice")
            let host = try await JoinedHost(api)
            func start(_ loginName: String) async throws -> APIAnswer { try await host.start(loginName) }
            await #expect(try start("bob").errorCode == "unknownLogin")
            let started = try await start("alice").signedPayload(
                key: try api.managerKey, type: SignedAnswerType.confirmationStart)
            let id = started["confirmationId"] as? String ?? "", waitToken = started["waitToken"] as? String ?? ""
            #expect(started["payload"] as? String == ConfirmationPayload.link(to: id, at: api.url))
            func state() async throws -> [String: Any] {
                try await api.post(
                    APIPath.confirmationWait,
                    ConfirmationWaitRequest(confirmationId: id, waitToken: waitToken, waitMilliseconds: 0)
                )
                .signedPayload(key: try api.managerKey, type: SignedAnswerType.confirmationResult)
            }
            // Someone who saw the device id and the confirmation id cannot spend the code attempts: an unsigned start, or
            // one signed by another key, is refused before the code is looked at.
            for signer in [nil, try P256PrivateKey()] as [P256PrivateKey?] {
                for _ in 0..<3 {
                    let forged = try await api.postStart(
                        device, purpose: .confirmation(id: id), code: "000000", signer: .some(signer))
                    #expect(forged.status == 401 && forged.errorCode == "signatureInvalid")
                }
            }
            #expect(
                try api.manager.query("SELECT code_failures FROM confirmations").map {
                    $0.trimmingCharacters(in: .whitespaces)
                } == ["0"])
            // Honest control: the device's own start with a wrong code is counted.
            #expect(
                try await api.postStart(device, purpose: .confirmation(id: id), code: "000000").errorCode == "wrongCode"
            )
            #expect(
                try api.manager.query("SELECT code_failures FROM confirmations").map {
                    $0.trimmingCharacters(in: .whitespaces)
                } == ["1"])
            let pending = try await state()
            #expect(
                pending["state"] as? String == "pending" && pending["nonce"] as? String == "n-alice"
                    && pending["loginName"] as? String == "alice")
            #expect(
                try await api.post(
                    APIPath.confirmationWait,
                    ConfirmationWaitRequest(confirmationId: id, waitToken: "wrong", waitMilliseconds: 0)
                ).status
                    == 404,
                "only the host that started it can wait for it")
            #expect(
                try await api.post(
                    APIPath.confirmationWithdrawal,
                    ConfirmationWithdrawalRequest(confirmationId: id, waitToken: waitToken)
                ).json["state"]
                    as? String == "withdrawn")
            await #expect(try state()["state"] as? String == "withdrawn")
        }
    }

    /// The pending cap counts per source (host and reported address, an IPv6 /64 as one) and per account; at a cap
    /// the oldest unopened one ends, one a device opened stays, and a cap of opened ones refuses.
    @Test func pendingConfirmationsAreCappedPerSourceAndAccountAndMakeRoomByAge() async throws {
        try await InProcessManager.run(
            config: ManagerProcess.testConfig + "\n[confirmation]\nmax_pending = 2\nmax_pending_per_account = 3\n"
        ) { inProcess in
            let api = inProcess.api
            let device = try await api.enrolDevice("alice@example.org")
            try api.manager.giveLogin("alice@example.org", "alice")
            let host = try await JoinedHost(api)
            func state(_ id: String) throws -> String {
                try api.manager.query("SELECT state FROM confirmations WHERE id = '\(id)'").first?.trimmingCharacters(
                    in: .whitespaces) ?? "?"
            }
            func started(_ remote: String) async throws -> String {
                let answer = try await host.start("alice", remoteHost: remote)
                guard answer.status == 200 else { throw TestFailure("start from \(remote): \(answer.json)") }
                return try answer.signedPayload(key: try api.managerKey, type: SignedAnswerType.confirmationStart)[
                    "confirmationId"] as? String ?? ""
            }
            // Two addresses of one /64 are one source: the third request displaces the first.
            let first = try await started("2001:db8:1:2::10"), second = try await started("2001:db8:1:2:ffff::1")
            let third = try await started("2001:db8:1:2::99")
            #expect(try [state(first), state(second), state(third)] == ["expired", "pending", "pending"])
            // A device opens the second (a wrong code): it stays when the source is full again; the third makes room.
            #expect(
                try await api.postStart(device, purpose: .confirmation(id: second), code: "000000").errorCode
                    == "wrongCode"
            )
            let fourth = try await started("2001:db8:1:2::1")
            #expect(try [state(second), state(third), state(fourth)] == ["pending", "expired", "pending"])
            // Another /64 is another source, up to the account's cap of 3; past it the oldest unopened of all ends.
            let other = try await started("2001:db8:9::1")
            #expect(try [state(second), state(fourth), state(other)] == ["pending", "pending", "pending"])
            let fifth = try await started("192.0.2.44")
            #expect(
                try [state(second), state(fourth), state(other), state(fifth)] == [
                    "pending", "expired", "pending", "pending",
                ])
            // When every pending one was opened, nothing makes room: refused, and it says so.
            #expect(
                try await api.postStart(device, purpose: .confirmation(id: other), code: "000000").errorCode
                    == "wrongCode")
            #expect(
                try await api.postStart(device, purpose: .confirmation(id: fifth), code: "000000").errorCode
                    == "wrongCode")
            let refused = try await host.start("alice", remoteHost: "192.0.2.44")
            #expect(
                refused.status == 429
                    && (refused.error["message"] as? String)?.contains("approve or deny those first") == true,
                "\(refused.json)")
        }
    }
}

/// A host joined to `api`'s manager with a key of its own, starting confirmations as the module does.
struct JoinedHost<Manager: ManagerFiles> {
    let api: API<Manager>
    let key = try! P256PrivateKey()
    let hostId: String

    init(_ api: API<Manager>, name: String = "web1", groups: [String] = []) async throws {
        self.api = api
        let token = try HostJoinToken(
            parsing: String(
                try api.manager.admin(["hosts", "add", name] + groups.flatMap { ["--group", $0] }).stdout.split(
                    separator: " "
                ).last ?? ""))
        let join = try JSONEncoder.canonical.encode(
            HostJoinRequest(
                joinSecret: token.secret, hostKey: Base64URL.encode(key.publicKey.derRepresentation),
                keyKind: .software, nonce: "j"))
        hostId =
            try await api.call(
                "POST", APIPath.hosts, body: join,
                headers: try Self.signed(key, APIPath.hosts, join, challenge: token.secret)
            )
            .signedPayload(key: try api.managerKey, type: SignedAnswerType.hostJoin)["hostId"] as? String ?? ""
    }

    static func signed(
        _ key: P256PrivateKey, _ path: String, _ body: Data, challenge: String
    ) throws -> [(String, String)] {
        let message = SignedRequest.canonicalMessage(method: "POST", path: path, body: body, challenge: challenge)
        return [(SignedRequest.signatureHeader, Base64URL.encode(try key.signature(for: message)))]
    }

    /// The host's user of a login name: the manager's own (a host that serves its directory), one of another uid, or
    /// none that the host names.
    enum LocalUser {
        case served
        case uid(Int64)
        case unnamed
    }

    func start(
        _ loginName: String, remoteHost: String = "192.0.2.7", localUser: LocalUser = .served
    ) async throws -> APIAnswer {
        let challenge =
            try await api.post(APIPath.hostChallenges, HostChallengeRequest(hostId: hostId)).json["challenge"]
            as? String
            ?? ""
        let localUid: Int64? =
            switch localUser {
            case .served:
                try api.manager.query("SELECT uid FROM accounts WHERE login_name = '\(loginName)'").first.flatMap {
                    Int64($0)
                }
            case .uid(let uid): uid
            case .unnamed: nil
            }
        let body = try JSONEncoder.canonical.encode(
            ConfirmationRequest(
                hostId: hostId, challenge: challenge, loginName: loginName, service: "sshd", remoteHost: remoteHost,
                tty: "ssh", command: nil,
                nonce: "n-\(loginName)", localUid: localUid))
        return try await api.call(
            "POST", APIPath.confirmations, body: body,
            headers: try Self.signed(key, APIPath.confirmations, body, challenge: challenge))
    }

    /// A request `make` builds over a fresh challenge, host-signed (by `key`, or the host's own) and sent to `path`.
    func signed(
        _ path: String, key: P256PrivateKey? = nil, _ make: (_ challenge: String) -> some Encodable
    ) async throws -> APIAnswer {
        let challenge =
            try await api.post(APIPath.hostChallenges, HostChallengeRequest(hostId: hostId)).json["challenge"]
            as? String ?? ""
        let body = try JSONEncoder.canonical.encode(make(challenge))
        return try await api.call(
            "POST", path, body: body, headers: try Self.signed(key ?? self.key, path, body, challenge: challenge))
    }

    /// The host's directory (POST /v1/hosts/directory), host-signed over a challenge it spends.
    func directory(
        loginName: String? = nil, uid: Int64? = nil, key: P256PrivateKey? = nil
    ) async throws -> (
        answer: APIAnswer, replay: () async throws -> APIAnswer
    ) {
        let challenge =
            try await api.post(APIPath.hostChallenges, HostChallengeRequest(hostId: hostId)).json["challenge"]
            as? String ?? ""
        let body = try JSONEncoder.canonical.encode(
            HostDirectoryRequest(hostId: hostId, challenge: challenge, nonce: "d", loginName: loginName, uid: uid))
        let headers = try Self.signed(key ?? self.key, APIPath.hostDirectory, body, challenge: challenge)
        let send = { [api] in try await api.call("POST", APIPath.hostDirectory, body: body, headers: headers) }
        return (try await send(), send)
    }
}
