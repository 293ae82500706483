import Foundation
import Testing
import XignCrypto
import XignHarness

@testable import XignProtocol

/// The shared vectors (Tests/Vectors/web-app.json): the canonical message a passkey signs and the sealed PIN, which
/// the web app's script computes a second time. Swift produces the same bytes here, and the script (in node's
/// WebCrypto) in the second test; the browser tests drive both ends for real.
@Suite struct WebAppVectorTests {
    struct Vectors: Decodable {
        struct CanonicalRequest: Decodable {
            let method, path, body, challenge, canonical, webauthnChallenge: String
        }
        struct SealedPIN: Decodable {
            let pin: String
            let binding: [String]
            let ephemeralKey, epk, ct: String
        }
        let canonicalRequests: [CanonicalRequest]
        let recipientKey: String
        let sealedPins: [SealedPIN]
    }

    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
        "../Vectors")

    static func vectors() throws -> Vectors {
        try JSONDecoder().decode(Vectors.self, from: Data(contentsOf: directory.appendingPathComponent("web-app.json")))
    }

    /// A PKCS#8 key as the vectors hold it (base64url DER), read as PEM.
    static func privateKey(_ der: String) throws -> P256PrivateKey {
        let base64 = try #require(Base64URL.decode(der)).base64EncodedString(options: .lineLength64Characters)
        return try P256PrivateKey(
            pemRepresentation: "-----BEGIN PRIVATE KEY-----\n\(base64)\n-----END PRIVATE KEY-----\n")
    }

    /// What each vector's binding names, through the one place the bindings are made.
    static func binding(_ parts: [String]) throws -> PINBinding {
        switch parts.first {
        case "approval" where parts.count == 3: return .approval(confirmationId: parts[1], challenge: parts[2])
        case "grant" where parts.count == 2: return .grant(parts[1])
        default: throw TestFailure("no binding for \(parts)")
        }
    }

    @Test func swiftProducesTheVectors() throws {
        let vectors = try Self.vectors()
        #expect(vectors.canonicalRequests.count >= 2 && vectors.sealedPins.count >= 2)
        for request in vectors.canonicalRequests {
            let message = SignedRequest.canonicalMessage(
                method: request.method, path: request.path, body: Data(request.body.utf8), challenge: request.challenge)
            #expect(String(decoding: message, as: UTF8.self) == request.canonical, "\(request.path)")
            #expect(Base64URL.encode(SHA256.hash(message)) == request.webauthnChallenge, "\(request.path)")
        }
        let recipient = try Self.privateKey(vectors.recipientKey)
        for vector in vectors.sealedPins {
            let binding = try Self.binding(vector.binding)
            let sealed = try PINSeal.seal(
                vector.pin, to: recipient.publicKey, binding: binding.data,
                ephemeral: try Self.privateKey(vector.ephemeralKey))
            #expect(Base64URL.encode(sealed.ephemeralPoint) == vector.epk, "\(vector.binding)")
            #expect(Base64URL.encode(sealed.ciphertext) == vector.ct, "\(vector.binding)")
            // What the page sends opens to the PIN with the manager's key, and only for the request it was made for.
            let message = SealedPINMessage(epk: vector.epk, ct: vector.ct)
            #expect(message.open(with: recipient, for: binding) == vector.pin)
            #expect(message.open(with: recipient, for: .grant("another")) == nil)
        }
    }

    @Test func theWebAppsScriptProducesTheVectors() throws {
        let directory = TemporaryDirectory()
        let check = try ChildProcess(
            "/usr/bin/node", [Self.directory.appendingPathComponent("check-web-app.mjs").path], in: directory
        ).wait(timeout: 60)
        #expect(check.status == 0, "\(check.stdout)\(check.stderr)")
        #expect(check.stdout.contains("0 mismatch(es)"), "\(check.stdout)")
    }
}
