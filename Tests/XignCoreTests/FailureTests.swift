import Foundation
import Testing
import XignCrypto
import XignProtocol
import XignTestSupport

@testable import XignCore

/// Bad input, bad answers and broken infrastructure: each gives a clear error and leaves the state as it was.
@Suite struct FailureTests {
    func code(of body: () throws -> Void) -> XignSdkErrorCode? {
        do { try body() } catch let error as XignSdkError { return error.errorCode } catch { return nil }
        return nil
    }

    func message(of body: () throws -> Void) -> String {
        do { try body() } catch { return "\(error)" }
        return ""
    }

    @Test func truncatedOversizedAndForeignAnswersAreRefused() throws {
        let registry = Registry(http: HTTPClient())
        let cases: [(String, [UInt8], XignSdkErrorCode, String)] = [
            (
                "truncated", FaultyServer.http(body: Array("{\"pinSpec\":".utf8), declaredLength: 500),
                .managerUnreachable, "broke off"
            ),
            (
                "oversized", FaultyServer.http(body: [UInt8](repeating: 0x20, count: 200_000)), .invalidManagerResponse,
                "larger than 65536"
            ),
            (
                "not JSON", FaultyServer.http(body: Array("<html>hello</html>".utf8)), .invalidManagerResponse,
                "cannot be read"
            ),
            (
                "wrong shape", FaultyServer.http(body: Array("{\"pinSpec\":{}}".utf8)), .invalidManagerResponse,
                "cannot be read"
            ),
            (
                "foreign error",
                FaultyServer.http(status: 502, contentType: "text/html", body: Array("<h1>Bad gateway</h1>".utf8)),
                .invalidManagerResponse, "without an xign error body"
            ),
            ("closed at once", [], .managerUnreachable, "broke off"),
            // Something answered, but not in HTTP: a reply, not silence (never a reason to log in offline).
            ("not HTTP", Array("SSH-2.0-OpenSSH_9.2\r\n".utf8), .transportFailure, "HTTP failed"),
            (
                "status line only", Array("HTTP/1.1 200 OK\r\n".utf8), .invalidManagerResponse,
                "cannot be read (0 bytes)"
            ),
            // Read, but past the wire's limits (RegistrationParametersMessage.checkLimits); the control is the real manager.
            ("no categories", try Self.parameters(categories: 0), .invalidManagerResponse, "categories is empty"),
            (
                "too many categories", try Self.parameters(categories: WireLimit.categories + 1),
                .invalidManagerResponse, "more than 16 entries"
            ),
            (
                "PIN lengths", try Self.parameters(categories: 1, maxPINLength: WireLimit.pin + 1),
                .invalidManagerResponse, "pinSpec"
            ),
        ]
        for (name, answer, expected, words) in cases {
            let server = try FaultyServer { _ in answer }
            let url = try ManagerURL(server.url)
            #expect(code { _ = try registry.initializationSynchronous(url: url) } == expected, "\(name)")
            #expect(message { _ = try registry.initializationSynchronous(url: url) }.contains(words), "\(name)")
        }
    }

    static func parameters(categories: Int, maxPINLength: Int = 8) throws -> [UInt8] {
        let message = RegistrationParametersMessage(
            pinSpec: PinPolicyMessage(
                minLength: 4, maxLength: maxPINLength, digitsOnly: true, maxSequenceLength: 3, maxSimilarDigits: 3,
                blacklist: []),
            categories: (0..<categories).map {
                CategoryMessage(id: "c\($0)", types: [], attributes: [], identificationAttributes: [])
            },
            alias: AliasPolicyMessage(minLength: 1, maxLength: 32), serviceMappingId: nil)
        return FaultyServer.http(body: Array(try JSONEncoder().encode(message)))
    }

    @Test func aSilentManagerTimesOut() throws {
        let server = try FaultyServer { _ in nil }
        var http = HTTPClient.Configuration()
        http.timeoutMilliseconds = 800
        let registry = Registry(http: HTTPClient(configuration: http))
        #expect(code { _ = try registry.initializationSynchronous(url: ManagerURL(server.url)) } == .timeout)
    }

    @Test func plainHTTPToAHostThatIsNotLoopbackIsRefusedBeforeAnyConnection() throws {
        let fixture = try Fixture()
        #expect(
            code {
                _ = try Registry(http: HTTPClient()).initializationSynchronous(url: ManagerURL("http://192.0.2.7:8440"))
            } == .insecureTransport)
        var payload = try fixture.register("plain@example.org").payload
        payload.managerURL = try ManagerURL("http://manager.example.org")
        let before = fixture.snapshot()
        #expect(
            code {
                _ = try fixture.sdk().personalizer().decryptPersonalizationInitializationDataSynchronous(
                    data: .init(payload: payload), pin: "24680")
            } == .insecureTransport)
        #expect(fixture.snapshot() == before)
    }

    /// The manager's real signing key, read from its data directory, to build forgeries that only lack its signature.
    func managerKey(_ fixture: Fixture) throws -> P256PublicKey {
        try P256PrivateKey(
            pemRepresentation: String(
                contentsOfFile: fixture.manager.dataDirectory + "/signing-key.pem", encoding: .utf8)
        ).publicKey
    }

    /// The key the manager opens PINs with, read from its data directory.
    func sealingKey(_ fixture: Fixture) throws -> P256PublicKey {
        try P256PrivateKey(
            pemRepresentation: String(
                contentsOfFile: fixture.manager.dataDirectory + "/pin-sealing-key.pem", encoding: .utf8)
        )
        .publicKey
    }

    @Test func forgedAndReplayedAnswersCannotPersonalize() throws {
        let fixture = try Fixture()
        let data = try fixture.register("mitm@example.org")
        let realKey = try managerKey(fixture)
        let attacker = try P256PrivateKey()
        @Sendable func forged(spki: P256PublicKey, signer: P256PrivateKey, nonce: String) throws -> [UInt8] {
            var result = DecryptResult(
                nonce: nonce, outcome: .newPersonalization, activationId: data.payload.activationId)
            result.session = SessionMessage(
                id: "s", challenge: "c", expiresAt: Int64(Date().timeIntervalSince1970 * 1000) + 60_000)
            let header = JWS.Header(
                typ: SignedAnswerType.decrypt, kid: spki.fingerprint, spki: Base64URL.encode(spki.derRepresentation))
            return FaultyServer.http(
                contentType: "application/jose",
                body: Array(try JWS.sign(payload: JSONEncoder().encode(result), header: header, with: signer).utf8))
        }
        @Sendable func nonce(in request: String) -> String {
            (try? JSONDecoder().decode(
                DecryptRequest.self, from: Data(request[request.range(of: "\r\n\r\n")!.upperBound...].utf8)
            ).nonce) ?? ""
        }
        // The stand-in names `key` as the manager's in /health, where the client learns what to seal the PIN to.
        @Sendable func health(_ key: P256PublicKey) -> [UInt8] {
            FaultyServer.http(
                body: Array(
                    try! JSONEncoder().encode(
                        HealthMessage(
                            status: "ok", version: "stand-in", managerKeyFingerprint: key.fingerprint,
                            managerKey: Base64URL.encode(key.derRepresentation), pinSealingKey: nil))))
        }
        // A genuine answer from the real manager, for a nonce of its own: replaying it must fail.
        let genuine = try ManagerClient(url: fixture.manager.url, http: HTTPClient()).postSigned(
            APIPath.personalizationDecrypt,
            body: JSONEncoder().encode(
                DecryptRequest(
                    activationId: data.payload.activationId, activationSecret: data.payload.activationSecret,
                    sealedPin: try SealedPINMessage(
                        sealing: "24680", to: try sealingKey(fixture),
                        for: .decrypt(activationId: data.payload.activationId, nonce: "captured-nonce")
                    ),
                    nonce: "captured-nonce", knownDeviceIds: []))
        )
        let cases: [(String, @Sendable (String) -> [UInt8]?, XignSdkErrorCode)] = [
            (
                "attacker's own key, named in /health", { [attacker] _ in health(attacker.publicKey) },
                .managerKeyMismatch
            ),
            // The PIN went sealed to the key /health named and the fingerprint matched, so an answer in another key is a forgery.
            (
                "attacker's own key",
                { [attacker] request in
                    try? forged(spki: attacker.publicKey, signer: attacker, nonce: nonce(in: request))
                },
                .managerSignatureInvalid
            ),
            (
                "real key, attacker's signature",
                { [attacker] request in try? forged(spki: realKey, signer: attacker, nonce: nonce(in: request)) },
                .managerSignatureInvalid
            ),
            (
                "replayed genuine answer",
                { _ in FaultyServer.http(contentType: "application/jose", body: Array(genuine.utf8)) },
                .managerSignatureInvalid
            ),
            (
                "unsigned JSON", { _ in FaultyServer.http(body: Array("{\"outcome\":\"newPersonalization\"}".utf8)) },
                .invalidManagerResponse
            ),
        ]
        for (name, respond, expected) in cases {
            let server = try FaultyServer { request in
                request.hasPrefix("GET /health") && !name.hasSuffix("/health")
                    ? FaultyServer.forward(request, toPort: fixture.manager.port) : respond(request)
            }
            let personalizer = try fixture.sdk().personalizer(managerURLOverride: ManagerURL(server.url))
            #expect(
                code {
                    _ = try personalizer.decryptPersonalizationInitializationDataSynchronous(data: data, pin: "24680")
                } == expected, "\(name)")
            #expect(try fixture.sdk().store.list().isEmpty)
        }
    }

    /// A manager older than sealed PINs names no key in /health: the client says to upgrade it and sends no PIN.
    @Test func aManagerThatCannotTakeASealedPINIsNamedAndGetsNoPIN() throws {
        let fixture = try Fixture()
        let data = try fixture.register("older@example.org")
        let requests = RecordedRequests()
        let standIn = try FaultyServer { request in
            requests.append(request)
            return FaultyServer.http(
                body: Array(#"{"status":"ok","version":"0.9","managerKeyFingerprint":"abc"}"#.utf8))
        }
        let personalizer = try fixture.sdk().personalizer(managerURLOverride: ManagerURL(standIn.url))
        do {
            _ = try personalizer.decryptPersonalizationInitializationDataSynchronous(data: data, pin: "24680")
            Issue.record("a personalization against a manager without managerKey went on")
        } catch let error as XignSdkError {
            #expect(
                error.errorCode == .invalidManagerResponse && error.message.contains("upgrade xign-manager"),
                "\(error.message)")
        }
        #expect(requests.all.allSatisfy { $0.hasPrefix("GET /health") } && !requests.all.joined().contains("24680"))
    }

    @Test func anUnsignedLockFromAStandInDoesNotStopTheNextPersonalization() throws {
        let fixture = try Fixture()
        let data = try fixture.register("planted@example.org")
        try fixture.sdk().store.checkWritable()
        let before = fixture.snapshot()
        let standIn = try FaultyServer { _ in
            FaultyServer.http(
                status: 423,
                body: Array(
                    """
                    {"error":{"code":"lockedOut","message":"locked","lockout":{"isPermanent":true,"lockedUntil":253402300799000,"failedAttempts":99,"issuedAt":0}}}
                    """.utf8))
        }
        let planted = try fixture.sdk().personalizer(managerURLOverride: ManagerURL(standIn.url))
        #expect(
            code { _ = try planted.decryptPersonalizationInitializationDataSynchronous(data: data, pin: "24680") }
                == .lockedOut,
            "shown for this attempt")
        #expect(fixture.snapshot() == before, "and nothing is written down")
        _ = try fixture.personalize(data)
        // Honest control: a lock the real manager signed holds, and the right PIN during it is refused uncharged.
        let second = try fixture.register("signed@example.org")
        let personalizer = try fixture.sdk().personalizer()
        guard
            case .lockout = try personalizer.decryptPersonalizationInitializationDataSynchronous(
                data: second, pin: "13570")
        else {
            throw TestFailure("expected a lockout")
        }
        let requests = standIn.requests.count
        #expect(
            code {
                _ = try personalizer.decryptPersonalizationInitializationDataSynchronous(data: second, pin: "24680")
            } == .lockedOut)
        #expect(
            try fixture.activations().first { $0["email"] as? String == "signed@example.org" }?["failedAttempts"]
                as? Int == 1,
            "the lock refused the attempt before the PIN was checked")
        #expect(standIn.requests.count == requests)
    }

    @Test func aManagerThatStopsMidFlowLosesNothing() throws {
        let fixture = try Fixture()
        let data = try fixture.register("midflow@example.org")
        let personalizer = try fixture.sdk(timeout: 2_000).personalizer()
        guard
            case .newPersonalization(let parameters) =
                try personalizer.decryptPersonalizationInitializationDataSynchronous(data: data, pin: "24680")
        else {
            Issue.record("expected newPersonalization")
            return
        }
        let before = fixture.snapshot()
        fixture.manager.stop()
        #expect(
            code { _ = try personalizer.personalizeIdentityManagerSynchronous(parameters: parameters) }
                == .managerUnreachable)
        #expect(fixture.snapshot() == before, "no enrolment and no stray key after the failure")
        // Once the manager is back, the same session completes.
        try fixture.manager.start()
        let result = try personalizer.personalizeIdentityManagerSynchronous(parameters: parameters)
        #expect(try fixture.sdk().store.list().map(\.idmIdentifier) == [result.idmIdentifier])
    }

    @Test func aStateDirectoryThatCannotBeWrittenStopsBeforeTheManagerIsAsked() throws {
        let fixture = try Fixture()
        let data = try fixture.register("readonly@example.org")
        let blocker = try fixture.directory.write("not-a-directory", "x")
        let sdk = try fixture.sdk(stateDirectory: blocker + "/state")
        let error = message {
            _ = try sdk.personalizer().decryptPersonalizationInitializationDataSynchronous(data: data, pin: "11112")
        }
        #expect(error.contains("cannot be written"), "\(error)")
        #expect(
            code {
                _ = try sdk.personalizer().decryptPersonalizationInitializationDataSynchronous(data: data, pin: "11112")
            } == .stateUnavailable)
        // The wrong PIN never reached the manager, so it did not count.
        #expect(
            try fixture.activations().first { $0["email"] as? String == "readonly@example.org" }?["failedAttempts"]
                as? Int == 0)
    }

    @Test func aDamagedStateFileIsReportedAndLeftAlone() throws {
        let fixture = try Fixture()
        try FileManager.default.createDirectory(
            atPath: fixture.directory.file("state"), withIntermediateDirectories: true)
        let path = try fixture.directory.write(
            "state/identity-managers.json", "{\"version\":1,\"entries\":[{\"idmIdentifier\":")
        let data = try fixture.register("damaged@example.org")
        let error = message {
            _ = try fixture.sdk().personalizer().decryptPersonalizationInitializationDataSynchronous(
                data: data, pin: "24680")
        }
        #expect(error.contains("damaged"), "\(error)")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "{\"version\":1,\"entries\":[{\"idmIdentifier\":")
    }

    @Test func activationDataWithAnotherManagerKeyIsRefused() throws {
        let fixture = try Fixture()
        var payload = try fixture.register("pinned@example.org").payload
        payload.managerKeyFingerprint = try P256PrivateKey().publicKey.fingerprint
        #expect(
            code {
                _ = try fixture.sdk().personalizer().decryptPersonalizationInitializationDataSynchronous(
                    data: .init(payload: payload), pin: "24680")
            } == .managerKeyMismatch)
        #expect(try fixture.sdk().store.list().isEmpty)
    }

    @Test func unknownActivationsAndWrongSecretsLookTheSame() throws {
        let fixture = try Fixture()
        var payload = try fixture.register("secret@example.org").payload
        payload.activationSecret = Base64URL.encode(try SecureRandom.bytes(32))
        let personalizer = try fixture.sdk().personalizer()
        #expect(
            code {
                _ = try personalizer.decryptPersonalizationInitializationDataSynchronous(
                    data: .init(payload: payload), pin: "24680")
            }
                == .activationNotFound)
        payload.activationId = try SecureRandom.identifier()
        #expect(
            code {
                _ = try personalizer.decryptPersonalizationInitializationDataSynchronous(
                    data: .init(payload: payload), pin: "24680")
            }
                == .activationNotFound)
        // A wrong secret is not a PIN guess: nothing was counted.
        #expect(try fixture.activations().first?["failedAttempts"] as? Int == 0)
    }
}

/// The requests a stand-in saw, from its threads.
final class RecordedRequests: @unchecked Sendable {
    private let lock = NSLock()
    private var requests: [String] = []
    func append(_ request: String) { lock.withLock { requests.append(request) } }
    var all: [String] { lock.withLock { requests } }
}
