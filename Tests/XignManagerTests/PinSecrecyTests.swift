import Foundation
import Testing
import XignCore
import XignCrypto
import XignProtocol
import XignTestSupport

/// docs/design.md, invariant 5: neither the activation data nor a copy of the database lets anyone test PINs offline.
@Suite struct PinSecrecyTests {
    @Test(arguments: TestDatabase.allCases) func thePayloadCarriesNothingDerivedFromThePIN(
        database: TestDatabase
    ) async throws {
        try await InProcessManager.run(database: database) { inProcess in
            let manager = inProcess.files
            let api = inProcess.api
            // Same PIN, two registrations: every field other than the manager's address and key differs,
            // so no field can be a function of the PIN.
            let first = try await api.register("same1@example.org", pin: "24680")
            let second = try await api.register("same2@example.org", pin: "24680")
            #expect(
                first.managerURL == second.managerURL && first.managerKeyFingerprint == second.managerKeyFingerprint)
            #expect(first.activationId != second.activationId)
            #expect(first.activationSecret != second.activationSecret)
            // The compact form holds the id, the secret and the fingerprint (26 characters each), then the URL: nothing else.
            #expect(
                first.deepLink == PersonalizationPayload.compactPrefix
                    + (try #require(Data(hexadecimal: first.activationId))).base32
                    + first.activationSecret + first.managerKeyFingerprint + "/" + first.managerURL.upperCased)
            // The manager stores only a hash of the activation secret.
            let stored = try manager.query("SELECT secret_hash FROM activations WHERE id = '\(first.activationId)'")
            #expect(stored == [Base64URL.encode(SHA256.hash(first.activationSecret))])
        }
    }

    /// G10: PINs are sealed to a key of their own, which the signing key vouches for; the signing key only signs. A PIN
    /// sealed to the signing key (as clients before this did) does not open, and the answer says what to do.
    @Test func pinsAreSealedToAKeyOfTheirOwnThatTheSigningKeyVouchesFor() async throws {
        try await InProcessManager.run { inProcess in
            let api = inProcess.api
            let health = try await api.call("GET", APIPath.health).json
            let statement = try #require(health["pinSealingKey"] as? String)
            let payload = try JWS.verify(
                statement, expectedType: SignedAnswerType.pinSealingKey, key: try api.managerKey)
            let key = try JSONDecoder().decode(PINSealingKeyMessage.self, from: payload).key
            #expect(
                key == Base64URL.encode(try api.pinSealingKey.derRepresentation),
                "the statement names the key in pin-sealing-key.pem")
            #expect(key != health["managerKey"] as? String, "not the signing key")
            #expect(throws: (any Error).self, "signed by the signing key, not by the sealing key") {
                _ = try JWS.verify(statement, expectedType: SignedAnswerType.pinSealingKey, key: try api.pinSealingKey)
            }
            let toSigningKey = try await api.post(
                APIPath.registrations,
                RegisterRequest(
                    categoryId: "email",
                    sealedPin: try SealedPINMessage(
                        sealing: "24680", to: try api.managerKey, for: .registration(categoryId: "email")),
                    attributes: ["email": "old@example.org"], alias: nil, serviceMappingId: nil,
                    arbitraryUserAttributes: nil))
            #expect(toSigningKey.status == 400, "\(toSigningKey.json)")
            #expect(
                (toSigningKey.error["message"] as? String ?? "").contains("sealed to the signing key"),
                "\(toSigningKey.json)")
            #expect(
                try await api.postRegistration("new@example.org").status == 201,
                "control: sealed to the PIN-sealing key")
            // A whole login through the SDK seals to the key the start answer names.
            let device = try await api.enrolDevice("login@example.org")
            let start = try await api.startAuthentication(device)
            #expect(start["pinSealingKey"] as? String == key)
            #expect(try await api.authenticate(device, pin: "24680").status == 200)

        }
    }

    @Test(arguments: TestDatabase.allCases) func theDatabaseAloneCannotCheckAPIN(database: TestDatabase) async throws {
        try await InProcessManager.run(database: database) { inProcess in
            let manager = inProcess.files
            let api = inProcess.api
            let payload = try await inProcess.api.register("verifier@example.org", pin: "24680")
            let row = try manager.query(
                "SELECT pin_salt || '|' || pin_verifier || '|' || CAST(pin_iterations AS TEXT) FROM activations WHERE id = '\(payload.activationId)'"
            )
            let fields = try #require(row.first?.split(separator: "|").map(String.init))
            let salt = try #require(Base64URL.decode(fields[0]))
            let stored = try #require(Base64URL.decode(fields[1]))
            let iterations = try #require(Int(fields[2]))
            let stretched = try PBKDF2.deriveKey(password: Data("24680".utf8), salt: salt, iterations: iterations)
            // With the pepper file (kept outside the database) the right PIN reproduces the verifier ...
            let pepper = try Data(contentsOf: URL(fileURLWithPath: manager.dataDirectory + "/pin-pepper"))
            #expect(HMACSHA256.authenticationCode(for: stretched, key: pepper) == stored)
            // ... without it, the salted hash of the right PIN matches nothing an attacker can compute.
            #expect(stretched != stored)
            #expect(HMACSHA256.authenticationCode(for: stretched, key: Data(count: 32)) != stored)
        }
    }

    @Test(arguments: TestDatabase.allCases) func guessesWithThePayloadAloneGoThroughTheLockout(
        database: TestDatabase
    ) async throws {
        // An attacker with the QR code but not the SDK: raw requests, no local lockout memory.
        try await InProcessManager.run(database: database) { inProcess in
            let api = inProcess.api
            let payload = try await api.register("guess@example.org", pin: "24680")
            let key = try api.managerKey
            var lastLock: [String: Any] = [:]
            for guess in ["11112", "11113", "11114", "11115"] {
                var answer = try await api.decrypt(payload, pin: guess)
                while answer.status == 423 {  // wait out each escalating delay, as a patient attacker would
                    let until = (answer.error["lockout"] as? [String: Any])?["lockedUntil"] as? Double ?? 0
                    try await sleep(pastEpochMilliseconds: until)
                    answer = try await api.decrypt(payload, pin: guess)
                }
                lastLock = try #require(
                    try answer.signedPayload(key: key, type: SignedAnswerType.decrypt)["lockout"] as? [String: Any])
            }
            #expect(lastLock["isPermanent"] as? Bool == true)
            #expect(lastLock["failedAttempts"] as? Int == 4)
            // Four guesses spent, and now the right PIN is worthless too.
            let right = try await api.decrypt(payload, pin: "24680")
            #expect(right.status == 423)
            #expect((right.error["lockout"] as? [String: Any])?["isPermanent"] as? Bool == true)
            // The administrator can lift it for a user who proved who they are.
            let unlock = try api.manager.admin(["unlock", payload.activationId])
            #expect(unlock.status == 0, "\(unlock.stderr)")
            #expect(try await api.decrypt(payload, pin: "24680").status == 200)
        }
    }

    @Test(arguments: TestDatabase.allCases)
    func arbitraryAttributesAreKeptOnlyForALinkedServiceAndOnlyUntilTheFirstPersonalization(
        database: TestDatabase
    ) async throws {
        let linked = "a4212c28-7fb0-5ec9-8cf2-5ecda1f81329"
        try await InProcessManager.run(
            config: ManagerProcess.testConfig + "\n[registration]\nlinked_services = \(linked)\n", database: database
        ) { inProcess in
            let manager = inProcess.files
            let api = inProcess.api
            #expect(
                try await api.call("GET", APIPath.registrationParameters, query: "?serviceMappingId=\(linked)").json[
                    "serviceMappingId"] as? String == linked)
            func register(_ email: String, mapping: String?) async throws {
                let request = RegisterRequest(
                    categoryId: "email", sealedPin: try api.sealed("24680", for: .registration(categoryId: "email")),
                    attributes: ["email": email],
                    alias: nil,
                    serviceMappingId: mapping, arbitraryUserAttributes: ["realm": "staff", "dept": "ops"])
                #expect(try await api.post(APIPath.registrations, request).status == 201)
            }
            try await register("unlinked@example.org", mapping: nil)
            try await register("unknown@example.org", mapping: "not-linked")
            try await register("linked@example.org", mapping: linked)
            let kept = try manager.query(
                "SELECT email || '=' || COALESCE(arbitrary_attributes, '-') FROM accounts ORDER BY email")
            #expect(
                kept == [
                    "linked@example.org={\"dept\":\"ops\",\"realm\":\"staff\"}", "unknown@example.org=-",
                    "unlinked@example.org=-",
                ])

            // The first personalization hands them to the linked service and deletes them.
            _ = try await api.personalize(
                PersonalizationPayload(parsing: manager.activationLink(for: "linked@example.org")))
            #expect(
                try manager.query(
                    "SELECT COALESCE(arbitrary_attributes, '-') FROM accounts WHERE email = 'linked@example.org'") == [
                        "-"
                    ])
            let delivered = try FileManager.default.contentsOfDirectory(
                atPath: manager.dataDirectory + "/outbox/linked/\(linked)")
            #expect(delivered.count == 1)
            #expect(
                try String(
                    contentsOfFile: manager.dataDirectory + "/outbox/linked/\(linked)/\(delivered[0])", encoding: .utf8)
                    == "{\"dept\":\"ops\",\"realm\":\"staff\"}")
        }
    }
}

@Suite struct OpenAPIValidatorTests {
    let spec = try! OpenAPIValidator(path: OpenAPIValidator.repositoryFile("docs/openapi.yaml"))

    func problems(
        _ path: String, _ status: Int, _ body: String, type: String = "application/json", method: String = "GET"
    ) -> String? {
        do {
            try spec.validate(path: path, method: method, status: status, contentType: type, body: Data(body.utf8))
            return nil
        } catch {
            return "\(error)"
        }
    }

    @Test func itCatchesWhatItShould() {
        let good =
            #"{"managerKey":"k","pinSealingKey":"a.b.cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc","managerKeyFingerprint":"abc","status":"ok","version":"1"}"#
        #expect(problems(APIPath.health, 200, good) == nil)
        #expect(
            problems(
                APIPath.health, 200,
                #"{"managerKey":"k","pinSealingKey":"a.b.cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc","managerKeyFingerprint":"abc","status":"ok","version":"1","extra":1}"#
            )?.contains(
                "unexpected property 'extra'") == true)
        #expect(
            problems(
                APIPath.health, 200,
                #"{"managerKey":"k","pinSealingKey":"a.b.cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc","managerKeyFingerprint":"abc","status":"fine","version":"1"}"#
            )?.contains(
                "is not one of") == true)
        #expect(
            problems(
                APIPath.health, 200,
                #"{"managerKey":"k","pinSealingKey":"a.b.cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc","status":"ok","version":"1"}"#
            )?.contains("missing 'managerKeyFingerprint'") == true)
        #expect(
            problems(
                APIPath.health, 200,
                #"{"managerKey":"k","pinSealingKey":"a.b.cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc","managerKeyFingerprint":"a b","status":"ok","version":"1"}"#
            )?.contains(
                "does not match") == true)
        #expect(problems(APIPath.health, 500, good)?.contains("does not list") == true)
        #expect(problems(APIPath.health, 200, good, type: "text/plain")?.contains("not documented") == true)
        #expect(
            problems(APIPath.challenges, 201, #"{"challenge":"x","expiresAt":true}"#, method: "POST")?.contains(
                "expected integer") == true)
        #expect(problems(APIPath.personalizationDecrypt, 200, "a.b.c", type: "application/jose", method: "POST") != nil)
    }
}

extension Data {
    init?(hexadecimal text: String) {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            guard let next = text.index(index, offsetBy: 2, limitedBy: text.endIndex),
                let byte = UInt8(text[index..<next], radix: 16)
            else {
                return nil
            }
            bytes.append(byte)
            index = next
        }
        self.init(bytes)
    }

    var base32: String { Base32.encode(self) }
}
