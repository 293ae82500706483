import Foundation
import JWTKit
import XignCore
import XignCrypto
import XignProtocol

/// An organization's OpenID Connect provider, as a registration meets it: its discovery document, the
/// authorization request (code flow with PKCE and a nonce), the code exchange, and the ID token checked with jwt-kit
/// (signature by a key of the provider's JWKS, RS256 or ES256; issuer, audience, expiry, nonce).
///
/// Every call is blocking with hard timeouts (libcurl, `HTTPClient`); the manager runs them on a thread pool of
/// their own, so a slow provider never holds a login.
public struct OpenIDProvider: Sendable {
    public struct Settings: Sendable, Equatable {
        public var issuer: ManagerURL
        public var clientId: String
        public var clientSecret: String?
        public var scopes: [String]
        /// The manager's callback, registered at the provider.
        public var redirectURI: String

        public init(issuer: ManagerURL, clientId: String, clientSecret: String?, scopes: [String], redirectURI: String)
        {
            (self.issuer, self.clientId, self.clientSecret, self.scopes, self.redirectURI) =
                (issuer, clientId, clientSecret, scopes, redirectURI)
        }
    }

    /// What discovery says, the parts a code flow needs.
    public struct Discovery: Sendable, Equatable, Decodable {
        public var issuer: String
        public var authorizationEndpoint: String
        public var tokenEndpoint: String
        public var jwksURI: String

        enum CodingKeys: String, CodingKey {
            case issuer
            case authorizationEndpoint = "authorization_endpoint"
            case tokenEndpoint = "token_endpoint"
            case jwksURI = "jwks_uri"
        }
    }

    /// Why a registration through the provider ends; each says what to do.
    public struct Failure: Error, Equatable, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    public let settings: Settings
    let http: HTTPClient

    public init(settings: Settings, timeoutMilliseconds: Int = 5_000) {
        self.settings = settings
        var configuration = HTTPClient.Configuration()
        configuration.timeoutMilliseconds = timeoutMilliseconds
        configuration.connectTimeoutMilliseconds = min(timeoutMilliseconds, 3_000)
        configuration.maximumResponseBytes = 256 * 1024
        http = HTTPClient(configuration: configuration)
    }

    /// The discovery document; its issuer must be the configured one, and its endpoints of the same scheme rules.
    public func discover() throws -> Discovery {
        let discovery: Discovery = try json(
            "GET", settings.issuer.endpoint("/.well-known/openid-configuration"), what: "discovery document")
        guard discovery.issuer == settings.issuer.description else {
            throw Failure(
                "the identity provider calls itself \(discovery.issuer.prefix(200)), not \(settings.issuer); check issuer in manager.conf"
            )
        }
        return discovery
    }

    /// The URL the person opens: the provider's login, which comes back to `redirectURI` with a code.
    public func authorizationURL(
        _ discovery: Discovery, state: String, nonce: String, codeVerifier: String
    ) -> String {
        let query: [(String, String)] = [
            ("response_type", "code"), ("client_id", settings.clientId), ("redirect_uri", settings.redirectURI),
            ("scope", settings.scopes.joined(separator: " ")), ("state", state), ("nonce", nonce),
            ("code_challenge", Self.codeChallenge(codeVerifier)), ("code_challenge_method", "S256"),
        ]
        return discovery.authorizationEndpoint + "?" + Self.formEncoded(query)
    }

    /// PKCE's S256 challenge of a verifier.
    public static func codeChallenge(_ verifier: String) -> String {
        Base64URL.encode(XignCrypto.SHA256.hash(Data(verifier.utf8)))
    }

    /// Exchanges the code for the provider's ID token (the compact JWT, not yet checked).
    public func exchange(code: String, codeVerifier: String, _ discovery: Discovery) throws -> String {
        var form: [(String, String)] = [
            ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", settings.redirectURI),
            ("code_verifier", codeVerifier),
        ]
        var headers: [(String, String)] = []
        if let secret = settings.clientSecret {
            let pair = Self.formComponent(settings.clientId) + ":" + Self.formComponent(secret)
            headers.append(("Authorization", "Basic " + Data(pair.utf8).base64EncodedString()))
        } else {
            form.append(("client_id", settings.clientId))
        }
        struct TokenAnswer: Decodable {
            var idToken: String?
            enum CodingKeys: String, CodingKey { case idToken = "id_token" }
        }
        let answer: TokenAnswer = try json(
            "POST", discovery.tokenEndpoint, what: "token answer", body: Data(Self.formEncoded(form).utf8),
            headers: headers, contentType: "application/x-www-form-urlencoded")
        guard let token = answer.idToken, token.utf8.count <= 16 * 1024 else {
            throw Failure("the identity provider's token answer holds no ID token; is the scope openid asked for?")
        }
        return token
    }

    /// The provider's keys, for `IDTokenCheck`.
    public func keys(_ discovery: Discovery) throws -> JWKS {
        try json("GET", discovery.jwksURI, what: "key set (JWKS)")
    }

    private func json<T: Decodable>(
        _ method: String, _ url: String, what: String, body: Data? = nil, headers: [(String, String)] = [],
        contentType: String = "application/json"
    ) throws -> T {
        let (base, path) = try Self.split(url)
        let response: HTTPClient.Response
        do {
            response = try http.send(
                method, to: base, path: path, body: body, headers: headers, contentType: contentType)
        } catch let failure as HTTPClient.Failure {
            throw Failure(
                "the identity provider at \(settings.issuer) cannot be reached for its \(what) (\(Self.reason(failure))); try again later or ask your administrator"
            )
        }
        guard response.status == 200 else {
            throw Failure(
                "the identity provider answered its \(what) with HTTP \(response.status); ask your administrator to check the provider's settings"
            )
        }
        do { return try JSONDecoder().decode(T.self, from: response.body) } catch {
            throw Failure("the identity provider's \(what) is not what OpenID Connect defines")
        }
    }

    private static func reason(_ failure: HTTPClient.Failure) -> String {
        switch failure {
        case .timedOut: "no answer in time"
        case .unreachable(let why), .tls(let why), .transport(let why), .insecureTransport(let why): why
        case .responseTooLarge: "its answer is too large"
        }
    }

    /// An endpoint URL as a base the transport policy checks and a path (with the query, if any).
    static func split(_ url: String) throws -> (ManagerURL, String) {
        guard let schemeEnd = url.firstRange(of: "://") else {
            throw Failure("the endpoint \(url.prefix(200)) is no URL")
        }
        let pathStart = url[schemeEnd.upperBound...].firstIndex(of: "/") ?? url.endIndex
        do {
            return (try ManagerURL(String(url[..<pathStart])), String(url[pathStart...]))
        } catch {
            throw Failure("the endpoint \(url.prefix(200)) is not usable: \(error)")
        }
    }

    static func formEncoded(_ pairs: [(String, String)]) -> String {
        pairs.map { formComponent($0.0) + "=" + formComponent($0.1) }.joined(separator: "&")
    }

    static func formComponent(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }
}
