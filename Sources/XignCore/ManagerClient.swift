import FoundationEssentials
import XignCrypto
import XignDevice
import XignProtocol

/// The manager's API, typed. Every answer is treated as hostile: bounded, decoded strictly,
/// and signed answers are verified before anything in them is believed.
struct ManagerClient {
    let url: ManagerURL
    let http: HTTPClient

    func get<T: Decodable>(_ path: String, query: String = "") throws -> T {
        try decode(try exchange("GET", path + query, body: nil))
    }

    func post<T: Decodable>(_ path: String, _ body: some Encodable) throws -> T {
        try decode(try exchange("POST", path, body: try JSONEncoder.canonical.encode(body)))
    }

    /// POSTs `body` and returns the compact JWS the manager signed.
    func postSigned(_ path: String, body: Data, headers: [(String, String)] = []) throws -> String {
        let response = try exchange("POST", path, body: body, headers: headers)
        guard response.contentType?.hasPrefix("application/jose") == true else {
            throw XignSdkError(
                .invalidManagerResponse,
                "the manager at \(url) answered \(path) without a signature; is it an xign manager?")
        }
        return String(decoding: response.body, as: UTF8.self)
    }

    /// POSTs `body` signed by `key` over the canonical encoding with `challenge` (docs/design.md, invariant 3); returns the signed answer.
    func postDeviceSigned(_ path: String, body: Data, challenge: String, key: any DeviceKey) throws -> String {
        try postSigned(
            path, body: body, headers: [try Self.signatureHeader(path, body: body, challenge: challenge, key: key)])
    }

    /// The signature header of a POST signed by a device or host key (docs/design.md, invariant 3).
    static func signatureHeader(
        _ path: String, body: Data, challenge: String, key: any DeviceKey
    ) throws -> (String, String) {
        let message = SignedRequest.canonicalMessage(method: "POST", path: path, body: body, challenge: challenge)
        do { return (SignedRequest.signatureHeader, Base64URL.encode(try key.signature(for: message))) } catch {
            throw DeviceKeys.error(error, doing: "the key cannot sign")
        }
    }

    /// A single-use challenge for a request signed by a device or a host.
    func challenge(_ path: String, _ body: some Encodable) throws -> String {
        let challenge: ChallengeMessage = try post(path, body)
        return challenge.challenge
    }

    /// Sends the request and turns non-2xx answers into SDK errors.
    func exchange(
        _ method: String, _ path: String, body: Data?, headers: [(String, String)] = []
    ) throws -> HTTPClient.Response {
        let response: HTTPClient.Response
        do {
            response = try http.send(method, to: url, path: path, body: body, headers: headers)
        } catch let failure as HTTPClient.Failure {
            switch failure {
            case .insecureTransport: throw XignSdkError(.insecureTransport, failure.description)
            case .timedOut: throw XignSdkError(.timeout, failure.description)
            case .tls: throw XignSdkError(.tlsFailure, failure.description)
            case .responseTooLarge: throw XignSdkError(.invalidManagerResponse, failure.description)
            case .unreachable: throw XignSdkError(.managerUnreachable, "\(failure.description) (\(url))")
            case .transport: throw XignSdkError(.transportFailure, "\(failure.description) (\(url))")
            }
        }
        guard (200..<300).contains(response.status) else { throw error(from: response) }
        return response
    }

    private func decode<T: Decodable>(_ response: HTTPClient.Response) throws -> T {
        let value: T
        do { value = try JSONDecoder().decode(T.self, from: response.body) } catch {
            throw XignSdkError(
                .invalidManagerResponse,
                "the manager at \(url) sent an answer that cannot be read (\(response.body.count) bytes); is the URL right and the manager up to date?"
            )
        }
        return try Self.withinLimits(value)
    }

    /// An answer that is a `LimitedMessage` is checked against the wire's limits here, once, for every caller.
    static func withinLimits<T>(_ value: T) throws -> T {
        guard let limited = value as? any LimitedMessage else { return value }
        do { try limited.checkLimits() } catch {
            throw XignSdkError(.invalidManagerResponse, "the manager's answer: \(error)")
        }
        return value
    }

    private func error(from response: HTTPClient.Response) -> XignSdkError {
        guard let body = try? JSONDecoder().decode(ErrorBody.self, from: response.body) else {
            return XignSdkError(
                .invalidManagerResponse,
                "the manager at \(url) answered HTTP \(response.status) without an xign error body; is the URL right?")
        }
        let detail = body.error
        // One line of plain text: it is shown in terminals and PAM conversations.
        let message = "the manager says: \(DisplayText.sanitized(detail.message, keepingLineFeeds: false).prefix(300))"
        switch detail.code {
        case .lockedOut:
            guard let lock = detail.lockout else {
                return XignSdkError(.invalidManagerResponse, "the manager reported a lockout without its time")
            }
            // Unsigned: shown for this attempt, never remembered (a stand-in for the manager could plant it).
            return XignSdkError(lockedOut: LockoutAttemptInformation(lock))
        case .securityInsufficient: return XignSdkError(.securityInsufficient, message)
        case .activationNotFound: return XignSdkError(.activationNotFound, message)
        case .activationRevoked: return XignSdkError(.activationRevoked, message)
        case .sessionInvalid, .challengeInvalid: return XignSdkError(.sessionExpired, message)
        case .pinPolicy: return XignSdkError(.pinPolicyViolation, message)
        case .registrationRejected: return XignSdkError(rejected: RegistrationRejection(detail), detail.message)
        case .deviceNotFound: return XignSdkError(.deviceNotEnrolled, message)
        case .internalError: return XignSdkError(.managerInternalError, message)
        case .busy: return XignSdkError(.managerBusy, message)
        case .unknownLogin: return XignSdkError(.unknownLoginName, message)
        case .tooManyRequests: return XignSdkError(.tooManyRequests, message)
        case .wrongCode: return XignSdkError(.wrongConfirmationCode, message)
        case .hostNotAllowed: return XignSdkError(.hostNotAllowed, message)
        case .localUserMismatch: return XignSdkError(.localUserMismatch, message)
        case .accountLocked: return XignSdkError(.accountLocked, message)
        case .biometricInvalidated: return XignSdkError(.biometricInvalidated, message)
        default: return XignSdkError(.managerRejectedRequest, message)
        }
    }

    /// Verifies a signed answer with the pinned key and checks it echoes our nonce.
    static func verify<T: Decodable & Sendable>(
        _ compact: String, type: String, key: P256PublicKey, as: T.Type, nonce: String, nonceOf: (T) -> String
    ) throws -> T {
        let payload: Data
        do { payload = try JWS.verify(compact, expectedType: type, key: key) } catch {
            throw XignSdkError(
                .managerSignatureInvalid,
                "the manager's answer is not signed by the manager key this machine pinned (\(error)); someone may be intercepting the connection"
            )
        }
        guard let value = try? JSONDecoder().decode(T.self, from: payload) else {
            throw XignSdkError(.invalidManagerResponse, "the manager's signed answer has an unexpected shape")
        }
        guard nonceOf(value) == nonce else {
            throw XignSdkError(
                .managerSignatureInvalid,
                "the manager's signed answer is for another request (nonce mismatch); it may be a replay")
        }
        return try withinLimits(value)
    }

    /// A first signed answer carries the manager's key; it is believed only if it matches the fingerprint the user
    /// brought from elsewhere (the activation data, a host join token).
    static func pinnedKey(from compact: String, fingerprint: String) throws -> P256PublicKey {
        guard let header = try? JWS.parse(compact).header, let spki = header.spki, let der = Base64URL.decode(spki),
            let key = try? P256PublicKey(derRepresentation: der)
        else {
            throw XignSdkError(.invalidManagerResponse, "the manager's first answer does not carry its signing key")
        }
        try check(key, against: fingerprint)
        return key
    }

    /// The manager's key as it says in /health, for sealing a PIN before any signed answer came; checked against
    /// `fingerprint` when the user brought one. Without one (a registration) it is only as good as TLS.
    /// The manager's signing key (checked against `fingerprint` when one is pinned), and the PIN-sealing key it
    /// signed.
    func managerKeys(pinnedTo fingerprint: String?) throws -> (signing: P256PublicKey, sealing: P256PublicKey) {
        let health: HealthMessage = try get(APIPath.health)
        guard let encoded = health.managerKey else {
            throw XignSdkError(
                .invalidManagerResponse,
                "the manager (\(health.version.prefix(32))) is older than this client and cannot take a sealed PIN; upgrade xign-manager"
            )
        }
        guard let der = Base64URL.decode(encoded), let key = try? P256PublicKey(derRepresentation: der) else {
            throw XignSdkError(.invalidManagerResponse, "the manager's health answer does not carry a usable key")
        }
        if let fingerprint { try Self.check(key, against: fingerprint) }
        guard let statement = health.pinSealingKey else {
            throw XignSdkError(
                .invalidManagerResponse,
                "the manager (\(health.version.prefix(32))) is older than this client and names no PIN-sealing key; upgrade xign-manager"
            )
        }
        let payload: Data
        do { payload = try JWS.verify(statement, expectedType: SignedAnswerType.pinSealingKey, key: key) } catch {
            throw XignSdkError(
                .managerSignatureInvalid, "the manager's PIN-sealing key is not signed by its signing key: \(error)")
        }
        guard let message = try? JSONDecoder().decode(PINSealingKeyMessage.self, from: payload) else {
            throw XignSdkError(.invalidManagerResponse, "the manager's PIN-sealing key cannot be read")
        }
        return (key, try Self.pinSealingKey(message.key))
    }

    /// A PIN-sealing key from a signed answer (SPKI DER, base64url); nil is a manager older than this client.
    static func pinSealingKey(_ encoded: String?) throws -> P256PublicKey {
        guard let encoded else {
            throw XignSdkError(
                .invalidManagerResponse,
                "the manager names no PIN-sealing key; it is older than this client: upgrade xign-manager")
        }
        guard encoded.utf8.count <= 200, let der = Base64URL.decode(encoded),
            let key = try? P256PublicKey(derRepresentation: der)
        else {
            throw XignSdkError(.invalidManagerResponse, "the manager's PIN-sealing key is not a P-256 key")
        }
        return key
    }

    private static func check(_ key: P256PublicKey, against fingerprint: String) throws {
        // Compact activation data carries the short form of the fingerprint; older links and join tokens the full one.
        let expected =
            fingerprint.utf8.count == key.shortFingerprint.utf8.count ? key.shortFingerprint : key.fingerprint
        guard constantTimeEquals(Data(expected.utf8), Data(fingerprint.utf8)) else {
            throw XignSdkError(
                .managerKeyMismatch,
                "the manager's signing key does not match the fingerprint you were given; the data may be forged or the connection intercepted"
            )
        }
    }

    /// `pin` sealed to the manager's PIN-sealing key for one request.
    static func seal(_ pin: String, to managerKey: P256PublicKey, for binding: PINBinding) throws -> SealedPINMessage {
        do { return try SealedPINMessage(sealing: pin, to: managerKey, for: binding) } catch {
            throw XignSdkError(
                .invalidInput, "the PIN cannot be sealed for the manager (\(error)); a PIN has 1 to 64 characters")
        }
    }

    static func nonce() throws -> String {
        do { return try SecureRandom.token(byteCount: 16) } catch {
            throw XignSdkError(.deviceKeyFailure, "no randomness available: \(error)")
        }
    }
}
