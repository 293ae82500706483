import XignIdentityProviders
import XignManagerConfiguration
import XignProtocol

/// What an ID token's claims make of a new account, as the administrator configured the provider: the address (a
/// valid one is required), the name, the login name when the provider may set it, and the host groups its groups
/// give. A provider's claims are only as good as that provider (docs/security.md).
struct ClaimMapping: Sendable {
    let provider: IdentityProviderSettings

    init(_ provider: IdentityProviderSettings) { self.provider = provider }

    func account(from claims: [String: [String]]) throws -> IdentityManager.NewAccount {
        guard let email = claims[provider.emailClaim]?.first?.lowercased(),
            EmailValidator.validate(email) == .valid
        else {
            throw OpenIDProvider.Failure(
                "the identity provider gave no valid email address in the claim \(provider.emailClaim); ask your administrator"
            )
        }
        // An address the provider did not verify may be anyone's (Entra sends no email_verified, and its mail
        // attribute can be set by the user): it would name an account here.
        if provider.emailVerified == .required, claims["email_verified"]?.first != "true" {
            throw OpenIDProvider.Failure(
                claims["email_verified"] == nil
                    ? "the identity provider does not say that it verified \(email); ask your administrator (email_verified in manager.conf)"
                    : "the identity provider has not verified \(email); verify it there first")
        }
        if !provider.emailDomains.isEmpty,
            !provider.emailDomains.contains(where: { email.hasSuffix("@" + $0) })
        {
            throw OpenIDProvider.Failure(
                "\(email) is not in a domain \(provider.name) registers (\(provider.emailDomains.joined(separator: ", "))); ask your administrator"
            )
        }
        var loginName: String?
        if let claim = provider.loginNameClaim {
            guard let name = claims[claim]?.first, LoginNameValidator.validate(name) == .valid,
                !ReservedNames.contains(name)
            else {
                throw OpenIDProvider.Failure(
                    "the identity provider's claim \(claim) is no login name this manager gives; ask your administrator"
                )
            }
            loginName = name
        }
        var attributes: [String: String] = [:]
        for (claim, attribute) in [("given_name", "givenName"), ("family_name", "familyName")] {
            if let value = claims[claim]?.first,
                AttributeValidator.validate(name: attribute, value: value) == .valid
            {
                attributes[attribute] = value
            }
        }
        if attributes.isEmpty, let name = claims["name"]?.first,
            AttributeValidator.validate(name: "givenName", value: name) == .valid
        {
            attributes["givenName"] = name
        }
        let groups = provider.groupsClaim.flatMap { claims[$0] } ?? []
        let hostGroups = Set(groups.flatMap { provider.hostGroups[$0] ?? [] }).sorted()
        return IdentityManager.NewAccount(
            email: email, loginName: loginName, attributes: attributes, arbitraryAttributes: nil, serviceMappingId: nil,
            organization: nil, hostGroups: hostGroups, origin: "through identity provider \(provider.id)")
    }
}
