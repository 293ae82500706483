import XignProtocol

/// The organization's identity providers a person may register through (`[identity_providers]` and
/// `[identity_provider.NAME]` in manager.conf), of OneWelcome's two types: a browser provider (OpenID Connect) and a
/// custom API provider (an endpoint of the organization's that accepts, refuses, or asks a second step).
public struct IdentityProviderSettings: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// OpenID Connect: the person signs in at the provider in a browser.
        case openID(issuer: ManagerURL, clientId: String, scopes: [String])
        /// The organization's endpoint takes the registration's data in one step or two (an init step first).
        case custom(endpoint: ManagerURL, steps: Int)
    }

    public var id: String
    /// What the person sees ("Corp SSO").
    public var name: String
    public var kind: Kind
    /// A file holding the client secret, or the custom endpoint's bearer token (root's, not readable by others).
    public var secretFile: String?
    public var emailClaim: String
    /// The claim that gives the login name on hosts, when the administrator lets the provider set it.
    public var loginNameClaim: String?
    /// The claim listing the person's groups, and which host groups each of them gives (at registration only).
    public var groupsClaim: String?
    public var hostGroups: [String: [String]]
    /// Whether an address the provider gives must carry `email_verified: true` (`required`), or the provider's word
    /// is enough (`trusted`: a provider that vouches for every address it gives, such as the organization's own
    /// directory). OpenID providers are `required` unless configured otherwise, custom ones `trusted`.
    public var emailVerified: EmailVerification
    /// The domains an address may be in; empty: any.
    public var emailDomains: [String]

    public enum EmailVerification: String, Sendable, Equatable {
        case required, trusted
    }

    /// "browser" or "custom", as the SDK's `IdentityProvider` names the type.
    public var type: String {
        if case .custom = kind { return "custom" }
        return "browser"
    }

    static let keys = [
        "name", "type", "issuer", "client_id", "client_secret_file", "scopes", "url", "steps", "secret_file",
        "email_claim", "login_name_claim", "groups_claim", "host_groups", "email_verified", "email_domains",
    ]
}

extension ManagerConfiguration {
    mutating func readIdentityProviders(
        _ file: ConfigFile, known: inout Set<String>, fail: (String, String) -> ConfigFile.ParseError
    ) throws {
        known.formUnion(["identity_providers.names", "identity_providers.default"])
        guard
            let ids = try Self.identifiers(
                file.list("identity_providers.names"), key: "identity_providers.names", fail: fail)
        else { return }
        identityProviders = try ids.map { id in
            let prefix = "identity_provider.\(id)."
            known.formUnion(IdentityProviderSettings.keys.map { prefix + $0 })
            func url(_ key: String) throws -> ManagerURL {
                guard let text = file.string(prefix + key) else {
                    throw fail("identity_providers.names", "names '\(id)', which needs \(prefix)\(key)")
                }
                do {
                    let url = try ManagerURL(text)
                    try url.checkTransportPolicy()
                    return url
                } catch { throw fail(prefix + key, "\(error)") }
            }
            let kind: IdentityProviderSettings.Kind
            switch file.string(prefix + "type") ?? "openid" {
            case "openid":
                let issuer = try url("issuer")
                guard let clientId = file.string(prefix + "client_id"), !clientId.isEmpty, clientId.utf8.count <= 256
                else {
                    throw fail("identity_providers.names", "names '\(id)', which needs \(prefix)client_id")
                }
                let scopes = file.list(prefix + "scopes") ?? ["openid", "email", "profile"]
                guard scopes.contains("openid") else { throw fail(prefix + "scopes", "must include openid") }
                kind = .openID(issuer: issuer, clientId: clientId, scopes: scopes)
            case "custom":
                let steps = try file.integer(prefix + "steps", in: 1...2) ?? 1
                kind = .custom(endpoint: try url("url"), steps: steps)
            default:
                throw fail(prefix + "type", "must be openid (OpenID Connect) or custom (the organization's endpoint)")
            }
            var hostGroups: [String: [String]] = [:]
            for entry in file.list(prefix + "host_groups") ?? [] {
                let parts = entry.split(separator: ":", maxSplits: 1).map(String.init)
                guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
                    throw fail(
                        prefix + "host_groups",
                        "lists PROVIDER-GROUP:HOST-GROUP+HOST-GROUP entries, not '\(entry.prefix(64))'")
                }
                hostGroups[parts[0], default: []] += parts[1].split(separator: "+").map(String.init)
            }
            let name = file.string(prefix + "name") ?? id
            guard TextAttributeValidator.validate(name) == .valid else {
                throw fail(prefix + "name", "must be 1 to \(TextAttributeValidator.maximumLength) printable characters")
            }
            let emailVerified: IdentityProviderSettings.EmailVerification
            if let text = file.string(prefix + "email_verified") {
                guard let value = IdentityProviderSettings.EmailVerification(rawValue: text) else {
                    throw fail(
                        prefix + "email_verified",
                        "must be required (the provider must say email_verified: true) or trusted (its word is enough)")
                }
                emailVerified = value
            } else if case .custom = kind {
                emailVerified = .trusted
            } else {
                emailVerified = .required
            }
            let domains = (file.list(prefix + "email_domains") ?? []).map { $0.lowercased() }
            for domain in domains where !HostNameValidator.isValid(domain) || !domain.contains(".") {
                throw fail(prefix + "email_domains", "lists domains such as example.org, not '\(domain.prefix(64))'")
            }
            return IdentityProviderSettings(
                id: id, name: name, kind: kind,
                secretFile: file.string(prefix + "client_secret_file") ?? file.string(prefix + "secret_file"),
                emailClaim: file.string(prefix + "email_claim") ?? "email",
                loginNameClaim: file.string(prefix + "login_name_claim"),
                groupsClaim: file.string(prefix + "groups_claim"), hostGroups: hostGroups,
                emailVerified: emailVerified, emailDomains: domains)
        }
        if let chosen = file.string("identity_providers.default") {
            guard identityProviders.contains(where: { $0.id == chosen }) else {
                throw fail(
                    "identity_providers.default",
                    "names '\(chosen.prefix(64))', which identity_providers.names does not list")
            }
            defaultIdentityProvider = chosen
        } else {
            defaultIdentityProvider = identityProviders.first?.id
        }
    }
}
