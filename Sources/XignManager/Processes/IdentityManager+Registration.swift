import Foundation
import XignCrypto
import XignProtocol

/// Registration: the parameters a client needs, and a new account with its first activation.
extension IdentityManager {
    public func registrationParameters(serviceMappingId: String?) -> RegistrationParametersMessage {
        RegistrationParametersMessage(
            pinSpec: configuration.pinPolicy,
            categories: configuration.categories.map { category in
                CategoryMessage(
                    id: category.id, types: category.types, attributes: category.attributes,
                    identificationAttributes: category.attributes.filter(\.isRequired).map(\.name)
                )
            },
            alias: configuration.aliasPolicy,
            serviceMappingId: serviceMappingId.flatMap { configuration.linkedServices.contains($0) ? $0 : nil }
        )
    }

    /// `client` is the caller's address for the rate limits; nil for the administrator.
    public func register(_ request: RegisterRequest, from client: String?) async throws -> RegisterResponse {
        guard configuration.registrationIsOpen else { throw ManagerError.registrationClosed }
        if let client { try await rateLimiter.charge(.registrationsPerAddress, key: client) }
        guard let category = configuration.categories.first(where: { $0.id == request.categoryId }) else {
            throw ManagerError.badRequest(
                "unknown category '\(request.categoryId.prefix(40))'; fetch the registration parameters again")
        }
        var errors: [String: AttributeErrorCode] = [:]
        let allowed = Set(category.attributes.map(\.name))
        for name in request.attributes.keys where !allowed.contains(name) { errors[name] = .invalid }
        for attribute in category.attributes {
            let value = request.attributes[attribute.name] ?? ""
            if value.isEmpty {
                if attribute.isRequired { errors[attribute.name] = .required }
                continue
            }
            let verdict = AttributeValidator.validate(name: attribute.name, value: value)
            if verdict != .valid { errors[attribute.name] = .invalid }
        }
        let pin = try pinChecker.open(request.sealedPin, for: .registration(categoryId: request.categoryId))
        let pinVerdict = configuration.pinPolicy.validate(pin)
        if pinVerdict != .valid { errors["pin"] = .invalid }
        if let alias = request.alias, configuration.aliasPolicy.validate(alias) != .valid { errors["alias"] = .invalid }
        guard let email = request.attributes["email"]?.lowercased(), !email.isEmpty else {
            throw ManagerError(
                .unprocessableContent, .registrationRejected, "an email address is required",
                attributes: errors.merging(["email": .required]) { a, _ in a })
        }
        if errors["email"] == nil, client != nil { try await rateLimiter.charge(.registrationsPerEmail, key: email) }
        if errors["email"] == nil {
            let blocked = configuration.blockedDomains.contains(String(email.split(separator: "@").last ?? ""))
            if blocked {
                errors["email"] = .notAvailable
            } else if try await activations.isEmailTaken(email) {
                errors["email"] = .notAvailable
            }
        }
        // A registrant may only ask for a login name: it is kept with the attributes until an administrator gives it
        // (`accounts set-login`), and system accounts' names are not even asked for.
        let requestedLoginName = request.attributes[AttributeValidator.loginName].flatMap { $0.isEmpty ? nil : $0 }
        if let name = requestedLoginName, errors[AttributeValidator.loginName] == nil {
            if ReservedNames.contains(name) {
                errors[AttributeValidator.loginName] = .invalid
            } else if try await activations.isLoginNameTaken(name) {
                errors[AttributeValidator.loginName] = .notAvailable
            }
        }
        guard errors.isEmpty else {
            throw ManagerError(
                .unprocessableContent, .registrationRejected,
                "the registration was rejected; correct the attributes marked in 'attributes'",
                attributes: errors, pinError: pinVerdict == .valid ? nil : pinVerdict.rawValue
            )
        }
        // Attributes for a linked service are kept until the first personalization; without one they are dropped now.
        let keepArbitrary = request.serviceMappingId.map { configuration.linkedServices.contains($0) } ?? false
        let arbitrary = request.arbitraryUserAttributes ?? [:]
        let account = NewAccount(
            email: email,
            loginName: nil,
            attributes: request.attributes.filter { $0.key != "email" },
            arbitraryAttributes: keepArbitrary && !arbitrary.isEmpty ? arbitrary : nil,
            serviceMappingId: keepArbitrary ? request.serviceMappingId : nil,
            organization: nil
        )
        let alias = try await activations.createAccount(
            account, pin: pin, alias: request.alias, by: "registration from \(client ?? "unknown address")")
        logger.info("registered account", metadata: ["email": "\(email)", "alias": "\(alias)"])
        return RegisterResponse(managerUrl: managerURL.description, activationAlias: alias)
    }

    struct NewAccount: Sendable, Codable {
        var email: String
        var loginName: String?
        var attributes: [String: String]
        var arbitraryAttributes: [String: String]?
        var serviceMappingId: String?
        var organization: String?
        var hostGroups: [String] = []
        /// Where the account came from, for the audit ("through identity provider corp").
        var origin: String? = nil
    }

    struct ActivationSecrets: Sendable {
        var id: String
        var secret: String
        var pin: PINVerifier

        /// `validFor`: how long the data may wait for its first personalization (none when `deviceId` is given).
        func record(
            accountId: String, alias: String, deviceId: String?, validFor lifetime: Int64
        ) -> ManagerStore.NewActivation {
            let now = IdentityManager.now()
            return ManagerStore.NewActivation(
                id: id, accountId: accountId, alias: alias, secretHash: IdentityManager.hashed(secret),
                pinSalt: Base64URL.encode(pin.salt), pinVerifier: Base64URL.encode(pin.value),
                pinIterations: pin.iterations, pinPepper: pin.pepper,
                deviceId: deviceId, secretValidUntil: deviceId == nil ? now + lifetime : 0, createdAt: now
            )
        }
    }
}
