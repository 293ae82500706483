import Foundation
import XignCore
import XignCrypto
import XignHarness
import XignProtocol

/// A phone's browser as the approving device, speaking the JSON API as the web app's script does: the passkey made at
/// personalization, and each approval in one passkey-signed request with the sealed PIN.
struct PhoneBench {
    let managerURL: ManagerURL
    /// What the PIN is sealed to: the key /health names, signed by the manager's key, as the web app takes it.
    let pinSealingKey: P256PublicKey
    let passkey: SoftwarePasskey
    let deviceId: String
    let pin: String
    let http = HTTPClient()

    init(managerURL: ManagerURL, data: PersonalizationInitializationData, pin: String) throws {
        self.managerURL = managerURL
        self.pin = pin
        let http = HTTPClient()
        let health = try JSONDecoder().decode(
            HealthMessage.self, from: try http.send("GET", to: managerURL, path: APIPath.health).body)
        let managerKey = try P256PublicKey(derRepresentation: Base64URL.decode(health.managerKey ?? "") ?? Data())
        let statement = try JWS.verify(
            health.pinSealingKey ?? "", expectedType: SignedAnswerType.pinSealingKey, key: managerKey)
        let sealing = try JSONDecoder().decode(PINSealingKeyMessage.self, from: statement)
        pinSealingKey = try P256PublicKey(derRepresentation: Base64URL.decode(sealing.key) ?? Data())
        let payload = data.payload
        let nonce = try SecureRandom.token(byteCount: 16)
        let decrypt = DecryptRequest(
            activationId: payload.activationId, activationSecret: payload.activationSecret,
            sealedPin: try SealedPINMessage(
                sealing: pin, to: pinSealingKey, for: .decrypt(activationId: payload.activationId, nonce: nonce)),
            nonce: nonce, knownDeviceIds: [])
        let decrypted = try Self.payload(
            http.send(
                "POST", to: managerURL, path: APIPath.personalizationDecrypt,
                body: try JSONEncoder.canonical.encode(decrypt)),
            as: DecryptResult.self)
        guard let session = decrypted.session, let challenge = Base64URL.decode(session.challenge) else {
            throw XignSdkError(.invalidManagerResponse, "the decrypt opened no session: \(decrypted.outcome)")
        }
        passkey = try SoftwarePasskey()
        let rpId = managerURL.host
        let (object, clientData) = try passkey.register(challenge: challenge, origin: managerURL.origin, rpId: rpId)
        let request = PasskeyPersonalizeRequest(
            sessionId: session.id, mode: .new,
            device: DeviceInformationMessage(name: "Passkey in a browser", platform: "bench"), nonce: nonce,
            attestationObject: Base64URL.encode(object), clientDataJSON: Base64URL.encode(clientData))
        deviceId = try Self.payload(
            http.send(
                "POST", to: managerURL, path: APIPath.passkeyPersonalizations,
                body: try JSONEncoder.canonical.encode(request)),
            as: PersonalizationResultMessage.self
        ).deviceId
    }

    /// One approval as the page sends it: a challenge, then the one request with the code and the sealed PIN.
    func approve(_ confirmationId: String, _ code: String) throws {
        let challenged = try http.send(
            "POST", to: managerURL, path: APIPath.challenges,
            body: try JSONEncoder.canonical.encode(ChallengeRequest(deviceId: deviceId)))
        let challenge = try JSONDecoder().decode(ChallengeMessage.self, from: challenged.body).challenge
        let body = try JSONEncoder.canonical.encode(
            ConfirmationApprovalRequest(
                deviceId: deviceId, challenge: challenge, confirmationId: confirmationId, confirmationCode: code,
                sealedPin: try SealedPINMessage(
                    sealing: pin, to: pinSealingKey,
                    for: .approval(confirmationId: confirmationId, challenge: challenge)),
                nonce: "b"))
        let header = try passkey.sign(
            path: APIPath.confirmationApproval, body: body, challenge: challenge, origin: managerURL.origin,
            rpId: managerURL.host)
        let answer = try Self.payload(
            http.send(
                "POST", to: managerURL, path: APIPath.confirmationApproval, body: body,
                headers: [(SignedRequest.signatureHeader, header)]),
            as: ConfirmationApprovalMessage.self)
        guard answer.outcome == .approved else {
            throw XignSdkError(.invalidManagerResponse, "the browser's approval ended in \(answer.outcome)")
        }
    }

    /// The payload of a signed answer (the bench trusts its own manager on loopback; the tests check signatures).
    private static func payload<T: Decodable>(_ response: HTTPClient.Response, as type: T.Type) throws -> T {
        let text = String(decoding: response.body, as: UTF8.self)
        guard response.status == 200, let (_, payload, _, _) = try? JWS.parse(text) else {
            throw XignSdkError(.invalidManagerResponse, "the manager answered \(response.status): \(text.prefix(300))")
        }
        return try JSONDecoder().decode(T.self, from: payload)
    }
}
