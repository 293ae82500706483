import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOFoundationCompat
import XignCore
import XignCrypto
import XignProtocol
import XignTestSupport

/// Talks to the real manager and checks every answer against docs/openapi.yaml: over HTTP to a `ManagerProcess`, or
/// through the router of an `InProcessManager` (the API contract needs no process).
struct API<Manager: ManagerFiles>: Sendable {
    let manager: Manager
    /// The manager's origin and RP id, as a browser at its public URL writes them into a passkey's assertion.
    let site: (origin: String, rpId: String)
    /// The manager's URL, as it names itself in links.
    let url: ManagerURL
    private let transport: Transport

    private enum Transport: Sendable {
        case network(ManagerURL)
        case router(any TestClientProtocol)
    }

    /// `through`: where requests go instead of the manager's own address, such as a proxy in front of it.
    init(manager: ManagerProcess, through: ManagerURL? = nil) where Manager == ManagerProcess {
        self.manager = manager
        site = ("http://127.0.0.1:\(manager.port)", "127.0.0.1")
        url = manager.url
        transport = .network(through ?? manager.url)
    }

    init(_ inProcess: InProcessManager) where Manager == ManagerFiles {
        manager = inProcess.files
        site = (inProcess.manager.relyingParty.origin, inProcess.manager.relyingParty.id)
        url = inProcess.manager.managerURL
        transport = .router(inProcess.client)
    }

    @discardableResult
    func call(
        _ method: String, _ path: String, query: String = "", body: Data? = nil, headers: [(String, String)] = []
    ) async throws -> APIAnswer {
        let (status, contentType, answer): (Int, String?, Data)
        switch transport {
        case .network(let url):
            let response = try await onOwnThread {
                try HTTPClient().send(method, to: url, path: path + query, body: body, headers: headers)
            }
            (status, contentType, answer) = (response.status, response.contentType, response.body)
        case .router(let client):
            var fields = HTTPFields()
            for (name, value) in headers {
                HTTPField.Name(name).map { fields.append(HTTPField(name: $0, value: value)) }
            }
            if body != nil, fields[.contentType] == nil { fields[.contentType] = "application/json" }
            let response = try await client.execute(
                uri: path + query, method: HTTPRequest.Method(method)!, headers: fields,
                body: body.map { ByteBuffer(bytes: $0) })
            (status, contentType, answer) = (
                Int(response.status.code), response.headers[.contentType], Data(buffer: response.body)
            )
        }
        try APISpec.openAPI.get().validate(
            path: path, method: method, status: status, contentType: contentType, body: answer)
        return APIAnswer(status: status, body: answer)
    }

    func post(_ path: String, _ value: some Encodable, headers: [(String, String)] = []) async throws -> APIAnswer {
        try await call("POST", path, body: try JSONEncoder.canonical.encode(value), headers: headers)
    }

    func post(_ path: String, json: String) async throws -> APIAnswer {
        try await call("POST", path, body: Data(json.utf8))
    }

    var managerKey: P256PublicKey {
        get throws {
            try P256PrivateKey(
                pemRepresentation: String(contentsOfFile: manager.dataDirectory + "/signing-key.pem", encoding: .utf8)
            ).publicKey
        }
    }

    /// A client SDK with its state next to this manager's.
    func sdk() throws -> XignSdk {
        var configuration = ClientConfiguration()
        configuration.stateDirectory = manager.directory.file("state")
        return try XignSdk(configuration: configuration, localUser: "u")
    }

    /// The key PINs are sealed to, read from the manager's data directory.
    var pinSealingKey: P256PublicKey {
        get throws {
            try P256PrivateKey(
                pemRepresentation: String(
                    contentsOfFile: manager.dataDirectory + "/pin-sealing-key.pem", encoding: .utf8)
            ).publicKey
        }
    }

    /// `pin` sealed to this manager's PIN-sealing key for `binding`, as a client sends it.
    func sealed(_ pin: String, for binding: PINBinding) throws -> SealedPINMessage {
        try SealedPINMessage(sealing: pin, to: pinSealingKey, for: binding)
    }

    /// The JSON of `pin` sealed for a registration in `category`, for bodies written by hand.
    func sealedRegistrationPIN(_ pin: String, category: String = "email") throws -> String {
        String(
            decoding: try JSONEncoder.canonical.encode(sealed(pin, for: .registration(categoryId: category))),
            as: UTF8.self)
    }

    /// POST /v1/registrations for `email` in the email category, whatever the answer.
    func postRegistration(_ email: String, pin: String = "24680") async throws -> APIAnswer {
        try await post(
            APIPath.registrations,
            RegisterRequest(
                categoryId: "email", sealedPin: try sealed(pin, for: .registration(categoryId: "email")),
                attributes: ["email": email], alias: nil,
                serviceMappingId: nil, arbitraryUserAttributes: nil))
    }

    func register(_ email: String, pin: String = "24680") async throws -> PersonalizationPayload {
        let answer = try await postRegistration(email, pin: pin)
        guard answer.status == 201 else { throw TestFailure("registration failed: \(answer.json)") }
        return try PersonalizationPayload(parsing: manager.activationLink(for: email))
    }

    func decrypt(
        _ payload: PersonalizationPayload, pin: String, nonce: String = "n-\(UUID().uuidString)"
    ) async throws -> APIAnswer {
        try await post(
            APIPath.personalizationDecrypt,
            DecryptRequest(
                activationId: payload.activationId, activationSecret: payload.activationSecret,
                sealedPin: try sealed(pin, for: .decrypt(activationId: payload.activationId, nonce: nonce)),
                nonce: nonce, knownDeviceIds: [])
        )
    }

    /// The body and signature of a personalization request signed with `key` over `challenge`.
    func signedPersonalization(
        session: [String: Any], key: P256PrivateKey, keyKind: KeyKind = .software,
        signWith signer: P256PrivateKey? = nil
    ) throws -> (Data, String) {
        let request = PersonalizeRequest(
            sessionId: session["id"] as? String ?? "", mode: .new,
            deviceKey: Base64URL.encode(key.publicKey.derRepresentation), keyKind: keyKind,
            device: DeviceInformationMessage(name: "test-host", platform: "Linux test"), nonce: "pn", newActivation: nil
        )
        let body = try JSONEncoder.canonical.encode(request)
        let message = SignedRequest.canonicalMessage(
            method: "POST", path: APIPath.personalizations, body: body, challenge: session["challenge"] as? String ?? ""
        )
        return (body, Base64URL.encode(try (signer ?? key).signature(for: message)))
    }

    /// Registers `email` and personalizes a new software key for it; returns the device id and its key.
    func enrolDevice(
        _ email: String, pin: String = "24680", keyKind: KeyKind = .software
    ) async throws -> (id: String, key: P256PrivateKey) {
        try await personalize(try await register(email, pin: pin), pin: pin, keyKind: keyKind)
    }

    /// Personalizes a new software key with the activation data `payload`; returns the device id and its key.
    func personalize(
        _ payload: PersonalizationPayload, pin: String = "24680", keyKind: KeyKind = .software
    ) async throws -> (id: String, key: P256PrivateKey) {
        let result = try await decrypt(payload, pin: pin).signedPayload(
            key: try managerKey, type: SignedAnswerType.decrypt)
        let device = try P256PrivateKey()
        guard let session = result["session"] as? [String: Any] else {
            throw TestFailure("decrypt gave no session: \(result)")
        }
        let (body, signature) = try signedPersonalization(session: session, key: device, keyKind: keyKind)
        let personalized = try await call(
            "POST", APIPath.personalizations, body: body, headers: [(SignedRequest.signatureHeader, signature)])
        guard
            let id = try personalized.signedPayload(key: try managerKey, type: SignedAnswerType.personalization)[
                "deviceId"] as? String
        else {
            throw TestFailure("personalization failed: \(personalized.json)")
        }
        return (id, device)
    }

    /// `count` devices, of the accounts `<prefix>0@example.org`, `<prefix>1@example.org`, …
    func enrolDevices(_ prefix: String, count: Int) async throws -> [(id: String, key: P256PrivateKey)] {
        var devices: [(id: String, key: P256PrivateKey)] = []
        for index in 0..<count { devices.append(try await enrolDevice("\(prefix)\(index)@example.org")) }
        return devices
    }

    /// POST /v1/authentications for `device` with `purpose`, signed over a fresh challenge as the client does;
    /// `signer` signs instead of the device's key (nil: unsigned), to see a forgery refused.
    func postStart(
        _ device: (id: String, key: P256PrivateKey), purpose: AuthenticationPurpose = .login(service: "pam"),
        code: String? = nil,
        signer: P256PrivateKey?? = .none, offlineReport: OfflineReportMessage? = nil
    ) async throws -> APIAnswer {
        let challenged = try await post(APIPath.challenges, ChallengeRequest(deviceId: device.id))
        // A manager that gives no challenge (503 in a failover) has answered the start too.
        guard challenged.status == 201 else { return challenged }
        let challenge = challenged.json["challenge"] as? String ?? ""
        let request = AuthenticationStartRequest(
            deviceId: device.id, challenge: challenge, purpose: purpose, confirmationCode: code, host: "h",
            localUser: "u", nonce: "s",
            offlineReport: offlineReport)
        let body = try JSONEncoder.canonical.encode(request)
        guard let key = signer ?? device.key else { return try await call("POST", APIPath.authentications, body: body) }
        let message = SignedRequest.canonicalMessage(
            method: "POST", path: APIPath.authentications, body: body, challenge: challenge)
        return try await call(
            "POST", APIPath.authentications, body: body,
            headers: [(SignedRequest.signatureHeader, Base64URL.encode(try key.signature(for: message)))]
        )
    }

    /// Starts an authentication of `device` for the `pam` service; the signed start payload.
    func startAuthentication(_ device: (id: String, key: P256PrivateKey)) async throws -> [String: Any] {
        try await postStart(device).signedPayload(key: try managerKey, type: SignedAnswerType.authenticationStart)
    }

    /// Finishes `started` with device key and PIN, signed by `signer` over its challenge, exactly as pam_xign does.
    func finishAuthentication(
        _ started: [String: Any], pin: String, signer: P256PrivateKey, role: String = "login", tokenNonce: String? = nil
    ) async throws -> APIAnswer {
        let (id, challenge) = (started["authenticationId"] as? String ?? "", started["challenge"] as? String ?? "")
        let request = AuthenticationFinishRequest(
            authenticationId: id, role: role, factors: [.device, .pin],
            sealedPin: try sealed(pin, for: .authentication(id: id, challenge: challenge)), attributeValues: [:],
            attributeSelections: [:],
            nonce: "f",
            tokenNonce: tokenNonce
        )
        let body = try JSONEncoder.canonical.encode(request)
        let message = SignedRequest.canonicalMessage(
            method: "POST", path: APIPath.authenticationFinish, body: body,
            challenge: started["challenge"] as? String ?? "")
        return try await call(
            "POST", APIPath.authenticationFinish, body: body,
            headers: [(SignedRequest.signatureHeader, Base64URL.encode(try signer.signature(for: message)))])
    }

    /// Start and finish for `device`: one login attempt with `pin`.
    func authenticate(_ device: (id: String, key: P256PrivateKey), pin: String) async throws -> APIAnswer {
        try await finishAuthentication(try await startAuthentication(device), pin: pin, signer: device.key)
    }
}

/// docs/openapi.yaml, read once; never mutated after loading.
enum APISpec {
    nonisolated(unsafe) static let openAPI = Result {
        try OpenAPIValidator(path: OpenAPIValidator.repositoryFile("docs/openapi.yaml"))
    }
}

/// One answer of the manager.
struct APIAnswer {
    let status: Int
    let body: Data
    var json: [String: Any] { (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:] }
    var error: [String: Any] { json["error"] as? [String: Any] ?? [:] }
    var errorCode: String? { error["code"] as? String }
    /// The payload of a signed answer, after checking the signature with the manager's key. An error answer fails
    /// with its status and body.
    func signedPayload(key: P256PublicKey, type: String) throws -> [String: Any] {
        guard (200..<300).contains(status) else {
            throw TestFailure(
                "expected a signed \(type), got \(status): \(String(decoding: body.prefix(500), as: UTF8.self))")
        }
        let payload = try JWS.verify(String(decoding: body, as: UTF8.self), expectedType: type, key: key)
        return try JSONSerialization.jsonObject(with: payload) as? [String: Any] ?? [:]
    }
}
