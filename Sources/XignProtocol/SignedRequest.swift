import FoundationEssentials
import XignCrypto

/// The canonical encoding a device signs (docs/design.md, invariant 3):
/// `xign-request-v1 LF METHOD LF path LF base64url(SHA-256(body)) LF challenge`.
/// The path is the API path ("/v1/…"), independent of any prefix the manager is mounted under.
public enum SignedRequest {
    public static let signatureHeader = "X-Xign-Signature"

    public static func canonicalMessage(method: String, path: String, body: Data, challenge: String) -> Data {
        let lines = ["xign-request-v1", method.uppercased(), path, Base64URL.encode(SHA256.hash(body)), challenge]
        return Data(lines.joined(separator: "\n").utf8)
    }
}
