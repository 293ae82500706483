import Foundation
import JWTKit
import XignCrypto

/// The checks an ID token must pass before its claims make an account: signed by a key of the provider's JWKS with
/// RS256 or ES256 (never `none`, never an HMAC a public key could be taken for), issued by the configured issuer for
/// this client, not expired (a minute of clock skew allowed), and carrying the nonce of this registration.
public struct IDTokenCheck: Sendable {
    public var issuer: String
    public var clientId: String
    public static let clockSkewSeconds: Double = 60
    static let algorithms: Set<String> = ["RS256", "ES256"]

    public init(issuer: String, clientId: String) {
        (self.issuer, self.clientId) = (issuer, clientId)
    }

    /// The token's claims, or the failure that says what is wrong with it.
    public func claims(of token: String, keys jwks: JWKS, nonce: String, now: Date) async throws -> IDTokenClaims {
        let header = try Self.header(of: token)
        guard let algorithm = header.alg, Self.algorithms.contains(algorithm) else {
            throw OpenIDProvider.Failure(
                "the identity provider signed the ID token with \(header.alg?.prefix(16) ?? "no algorithm"); xign takes RS256 or ES256"
            )
        }
        guard let kid = header.kid, jwks.keys.contains(where: { $0.keyIdentifier?.string == kid }) else {
            throw OpenIDProvider.Failure(
                "the ID token is signed by a key the identity provider does not publish; ask your administrator to check the provider"
            )
        }
        let keys = JWTKeyCollection()
        for key in jwks.keys where key.keyIdentifier?.string == kid {
            guard (key.algorithm?.rawValue).map({ $0 == algorithm }) ?? true else { continue }
            do { try await keys.add(jwk: key.withFullLengthCoordinates()) } catch {
                throw OpenIDProvider.Failure(
                    "the identity provider publishes its key \(kid.prefix(64)) in a form xign cannot use (\(error)); ask your administrator to check the provider"
                )
            }
        }
        let claims: IDTokenClaims
        do { claims = try await keys.verify(token, as: IDTokenClaims.self) } catch {
            throw OpenIDProvider.Failure(
                "the ID token's signature does not verify; the answer is not the identity provider's")
        }
        guard claims.iss == issuer else {
            throw OpenIDProvider.Failure("the ID token was issued by \(claims.iss.prefix(200)), not \(issuer)")
        }
        guard claims.aud.contains(clientId), claims.aud.count == 1 || claims.azp == clientId else {
            throw OpenIDProvider.Failure(
                "the ID token is for another application (\(claims.aud.joined(separator: ",").prefix(200)))")
        }
        guard claims.exp + Self.clockSkewSeconds > now.timeIntervalSince1970 else {
            throw OpenIDProvider.Failure("the ID token has expired; sign in at the identity provider again")
        }
        if let iat = claims.iat, iat - Self.clockSkewSeconds > now.timeIntervalSince1970 {
            throw OpenIDProvider.Failure(
                "the ID token was issued in the future; check the clocks of the provider and the manager")
        }
        guard let sent = claims.nonce, sent == nonce else {
            throw OpenIDProvider.Failure(
                "the ID token belongs to another sign-in (its nonce differs); start the registration again")
        }
        return claims
    }

    struct Header: Decodable {
        var alg: String?
        var kid: String?
    }

    static func header(of token: String) throws -> Header {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let data = Base64URL.decode(String(parts[0])),
            let header = try? JSONDecoder().decode(Header.self, from: data)
        else {
            throw OpenIDProvider.Failure("the identity provider's ID token is not a signed JWT")
        }
        return header
    }
}

/// An ID token's claims: the registered ones the check reads, and every claim by name for the mapping
/// (`ClaimMapping`), strings and lists of strings only.
public struct IDTokenClaims: JWTPayload, Equatable {
    public var iss: String
    public var sub: String
    public var aud: [String]
    public var azp: String?
    public var exp: Double
    public var iat: Double?
    public var nonce: String?
    public var claims: [String: [String]]

    /// Signature only; the claims are checked by `IDTokenCheck` against what the registration expects.
    public func verify(using algorithm: some JWTAlgorithm) async throws {}

    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Key.self)
        func required<T: Decodable>(_ name: String, _ type: T.Type) throws -> T {
            try container.decode(T.self, forKey: Key(stringValue: name))
        }
        iss = try required("iss", String.self)
        sub = try required("sub", String.self)
        if let list = try? container.decode([String].self, forKey: Key(stringValue: "aud")) {
            aud = list
        } else {
            aud = [try required("aud", String.self)]
        }
        azp = try container.decodeIfPresent(String.self, forKey: Key(stringValue: "azp"))
        exp = try required("exp", Double.self)
        iat = try container.decodeIfPresent(Double.self, forKey: Key(stringValue: "iat"))
        nonce = try container.decodeIfPresent(String.self, forKey: Key(stringValue: "nonce"))
        var claims: [String: [String]] = [:]
        for key in container.allKeys {
            if let text = try? container.decode(String.self, forKey: key) {
                claims[key.stringValue] = [text]
            } else if let list = try? container.decode([String].self, forKey: key) {
                claims[key.stringValue] = list
            } else if let flag = try? container.decode(Bool.self, forKey: key) {
                claims[key.stringValue] = [flag ? "true" : "false"]
            }
        }
        self.claims = claims
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        for (name, values) in claims {
            if values.count == 1 {
                try container.encode(values[0], forKey: Key(stringValue: name))
            } else {
                try container.encode(values, forKey: Key(stringValue: name))
            }
        }
        try container.encode(iss, forKey: Key(stringValue: "iss"))
        try container.encode(sub, forKey: Key(stringValue: "sub"))
        try container.encode(aud, forKey: Key(stringValue: "aud"))
        try container.encode(exp, forKey: Key(stringValue: "exp"))
        try container.encodeIfPresent(iat, forKey: Key(stringValue: "iat"))
        try container.encodeIfPresent(nonce, forKey: Key(stringValue: "nonce"))
    }
}
