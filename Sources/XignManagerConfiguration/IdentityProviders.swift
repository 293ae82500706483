import XignProtocol

/// The organization's identity providers a person may register through (`[identity_providers]` and
/// `[identity_provider.NAME]` in manager.conf), as OneWelcome's SDK names them: a browser provider is OpenID Connect.
public struct IdentityProviderSettings: Sendable, Equatable {
    public var id: String
    /// What the person sees ("Corp SSO").
    public var name: String
    public var issuer: ManagerURL
    public var clientId: String
    /// A file holding the client secret (root's, not readable by others); none for a public client with PKCE.
    public var clientSecretFile: String?
    public var scopes: [String]
    public var emailClaim: String
    /// The claim that gives the login name on hosts, when the administrator lets the provider set it.
    public var loginNameClaim: String?
    /// The claim listing the person's groups, and which host groups each of them gives.
    public var groupsClaim: String?
    public var hostGroups: [String: [String]]

    static let keys = [
        "name", "type", "issuer", "client_id", "client_secret_file", "scopes", "email_claim",
        "login_name_claim", "groups_claim", "host_groups",
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
            guard (file.string(prefix + "type") ?? "openid") == "openid" else {
                throw fail(prefix + "type", "must be openid (OpenID Connect)")
            }
            guard let issuerText = file.string(prefix + "issuer") else {
                throw fail("identity_providers.names", "names '\(id)', which needs \(prefix)issuer")
            }
            let issuer: ManagerURL
            do { issuer = try ManagerURL(issuerText) } catch { throw fail(prefix + "issuer", "\(error)") }
            do { try issuer.checkTransportPolicy() } catch { throw fail(prefix + "issuer", "\(error)") }
            guard let clientId = file.string(prefix + "client_id"), !clientId.isEmpty, clientId.utf8.count <= 256 else {
                throw fail("identity_providers.names", "names '\(id)', which needs \(prefix)client_id")
            }
            let scopes = file.list(prefix + "scopes") ?? ["openid", "email", "profile"]
            guard scopes.contains("openid") else { throw fail(prefix + "scopes", "must include openid") }
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
            return IdentityProviderSettings(
                id: id, name: name, issuer: issuer, clientId: clientId,
                clientSecretFile: file.string(prefix + "client_secret_file"), scopes: scopes,
                emailClaim: file.string(prefix + "email_claim") ?? "email",
                loginNameClaim: file.string(prefix + "login_name_claim"),
                groupsClaim: file.string(prefix + "groups_claim"), hostGroups: hostGroups)
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
