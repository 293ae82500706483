import FoundationEssentials

/// Compact JWS with ES256, the envelope of every manager answer that changes trust.
///
/// Only ES256 is accepted; the header's `alg` is checked, never trusted to pick an algorithm.
public enum JWS {
    public struct Header: Codable, Equatable, Sendable {
        public var alg: String
        public var typ: String
        /// The fingerprint of the signing key.
        public var kid: String
        /// The signing key itself (SPKI, base64url). Sent only where the client pins it from a fingerprint.
        public var spki: String?

        public init(typ: String, kid: String, spki: String? = nil) {
            self.alg = "ES256"
            self.typ = typ
            self.kid = kid
            self.spki = spki
        }
    }

    public enum Failure: Error, Equatable, CustomStringConvertible {
        case malformed(String)
        case badSignature
        case wrongKey

        public var description: String {
            switch self {
            case .malformed(let why): return "signed answer is malformed: \(why)"
            case .badSignature: return "signature does not verify"
            case .wrongKey: return "answer is signed by a key other than the pinned one"
            }
        }
    }

    public static let maximumLength = 64 * 1024

    public static func sign(payload: Data, header: Header, with key: P256PrivateKey) throws -> String {
        let encodedHeader = Base64URL.encode(try JSONEncoder.canonical.encode(header))
        let signingInput = encodedHeader + "." + Base64URL.encode(payload)
        let signature = try key.signature(for: Data(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// Splits and decodes without verifying; the caller decides which key to verify with.
    public static func parse(
        _ compact: String
    ) throws -> (header: Header, payload: Data, signingInput: Data, signature: Data) {
        guard compact.utf8.count <= maximumLength else { throw Failure.malformed("longer than \(maximumLength) bytes") }
        let parts = compact.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw Failure.malformed("expected three dot-separated parts") }
        guard let headerBytes = Base64URL.decode(String(parts[0])),
            let payload = Base64URL.decode(String(parts[1])),
            let signature = Base64URL.decode(String(parts[2]))
        else { throw Failure.malformed("not base64url") }
        guard let header = try? JSONDecoder().decode(Header.self, from: headerBytes) else {
            throw Failure.malformed("header is not a JWS header")
        }
        guard header.alg == "ES256" else { throw Failure.malformed("algorithm \(header.alg) is not ES256") }
        return (header, payload, Data((parts[0] + "." + parts[1]).utf8), signature)
    }

    /// Verifies with `key` and returns the payload.
    public static func verify(_ compact: String, expectedType: String, key: P256PublicKey) throws -> Data {
        let parts = try parse(compact)
        guard parts.header.typ == expectedType else {
            throw Failure.malformed("type \(parts.header.typ), expected \(expectedType)")
        }
        guard parts.header.kid == key.fingerprint else { throw Failure.wrongKey }
        guard key.isValidSignature(parts.signature, for: parts.signingInput) else { throw Failure.badSignature }
        return parts.payload
    }
}

extension JSONEncoder {
    /// Sorted keys, so the same value always gives the same bytes.
    public static var canonical: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}
