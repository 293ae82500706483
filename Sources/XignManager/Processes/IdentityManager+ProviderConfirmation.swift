import Foundation
import XignCrypto
import XignManagerConfiguration
import XignProtocol
import XignWeb

/// The end of a registration through an identity provider (docs/security.md, H1). A terminal's registration waits,
/// after the provider's answer, for the person who signed in to type the code the terminal shows, in the browser that
/// came back (its cookie names the registration): a sign-in link sent to a colleague makes no account for the sender
/// without that code, and the page says what is being registered and from where. Only then is the account made, in
/// one transaction with its notice mail, whose "not me" link cancels the activation while it waits and removes its
/// device once it is used.
extension IdentityManager {
    /// Wrong codes a registration takes before it ends: a code has a million values.
    static let providerRegistrationCodeTries = 3
    /// A client that has not waited for this long is gone (closed, or its network): no account is made for it.
    static let providerRegistrationClientSilence: Int64 = 60_000
    /// How long a notice mail's "not me" link works.
    static let registrationCancellationMilliseconds: Int64 = 30 * 86_400_000

    /// The code the browser with the cookie `browserSecret` typed, or its "this is not mine".
    public func confirmProviderRegistration(
        _ request: ProviderRegistrationConfirmationRequest, browserSecret: String?
    ) async throws -> ProviderRegistrationConfirmationMessage {
        guard let browserSecret, browserSecret.utf8.count <= WireLimit.nonce,
            let registration = try await database.read({ store in
                try await store.confirmingProviderRegistration(
                    browserHash: Self.hashed(browserSecret), now: Self.now())
            })
        else {
            throw ManagerError(
                .notFound, .sessionInvalid,
                "this browser has no registration waiting for its code: it ran out (10 minutes) or was answered; start the registration again where you started it"
            )
        }
        func refuse(_ message: String) async throws -> ProviderRegistrationConfirmationMessage {
            try await database.transaction { store in
                try await store.settleProviderRegistration(
                    id: registration.id, .refused, message: message, email: nil, loginName: nil, sealedActivation: nil)
            }
            logger.notice(
                "registration through an identity provider refused",
                metadata: ["provider": "\(registration.provider)", "why": "\(message)"])
            return ProviderRegistrationConfirmationMessage(
                outcome: .refused, message: "No account was made: \(message).")
        }
        if request.cancel == true {
            return try await refuse("the person who signed in at the identity provider said it was not theirs")
        }
        let typed = String((request.code ?? "").filter { $0.isASCII && $0.isNumber })
        guard !typed.isEmpty else { throw ManagerError.badRequest("type the code that the registration shows") }
        guard let expected = registration.codeHash,
            constantTimeEquals(Data(Self.hashed(typed).utf8), Data(expected.utf8))
        else {
            guard let failures = try await database.transaction({ try await $0.countWrongCode(id: registration.id) })
            else { throw ManagerError(.conflict, .sessionInvalid, "this registration was answered meanwhile") }
            let left = Self.providerRegistrationCodeTries - failures
            guard left > 0 else {
                return try await refuse(
                    "the code was wrong \(Self.providerRegistrationCodeTries) times; start the registration again")
            }
            throw ManagerError(
                .unprocessableContent, .wrongCode,
                "that is not the code the registration shows; \(left) \(left == 1 ? "try" : "tries") left")
        }
        guard Self.now() - registration.lastWaitedAt < Self.providerRegistrationClientSilence else {
            return try await refuse(
                "the program that started the registration stopped waiting for it; start the registration again")
        }
        guard let pending = registration.account,
            let account = try? JSONDecoder().decode(NewAccount.self, from: Data(pending.utf8))
        else { throw ManagerError.internalFailure("a registration waiting for its code holds no account") }
        do {
            _ = try await register(registration, account, from: try identityProviders.provider(registration.provider))
        } catch {
            return try await refuse(refusal(error))
        }
        return ProviderRegistrationConfirmationMessage(
            outcome: .registered,
            message:
                "Registered as \(account.email)\(account.loginName.map { " (login name \($0))" } ?? ""). Go back to where you started: the activation continues there."
        )
    }

    /// Makes the account with the activation PIN chosen at the start, tells its address (with a "not me" link), and
    /// hands the activation on, all in one transaction: sealed for the waiting client, or, for the web app, to the
    /// browser (the registration's row goes, so no wait can take it). Returns the activation link.
    func register(
        _ registration: ManagerStore.ProviderRegistration, _ account: NewAccount,
        from provider: IdentityProviderSettings
    ) async throws -> String {
        let activation = try activations.makeActivation(verifier: registration.pin)
        let alias = registration.alias ?? "Activation 1"
        let link = activations.payload(for: activation).appLink
        let cancellation = try SecureRandom.token()
        let notice = Outbox.registrationNotice(
            to: account.email, alias: alias, provider: provider.name, startedAt: registration.startedAt,
            startedFrom: registration.startedFrom,
            cancelLink: managerURL.endpoint(WebPath.notMe) + "#" + cancellation)
        let sealed = registration.inBrowser ? nil : try secrets.seal(link)
        let mailId: String
        do {
            mailId = try await database.transaction { store in
                try await self.activations.insert(
                    account, activation: activation, alias: alias, by: "identity provider \(provider.id)", in: store)
                try await store.insertActivationCancellation(
                    tokenHash: Self.hashed(cancellation), activationId: activation.id,
                    expiresAt: Self.now() + Self.registrationCancellationMilliseconds)
                let handedOver =
                    registration.inBrowser
                    ? try await store.deleteProviderRegistration(id: registration.id)
                    : try await store.settleProviderRegistration(
                        id: registration.id, .registered, message: nil, email: account.email,
                        loginName: account.loginName, sealedActivation: sealed)
                guard handedOver else {
                    throw ManagerError(.conflict, .sessionInvalid, "this registration was answered meanwhile")
                }
                return try await self.mail.queue(notice, in: store)
            }
        } catch {
            throw try await activations.explained(error, creating: account)
        }
        await mail.deliver(id: mailId)
        logger.info(
            "registered account through an identity provider",
            metadata: ["provider": "\(provider.id)", "email": "\(account.email)"])
        return link
    }

    /// A notice mail's "not me" link: the activation it names stops working, and the device that took it, if any, is
    /// removed. Once per link.
    public func cancelRegistration(
        _ request: RegistrationCancellationRequest
    ) async throws
        -> RegistrationCancellationMessage
    {
        let (email, alias, device) = try await database.transaction { store in
            guard
                let activationId = try await store.takeActivationCancellation(
                    tokenHash: Self.hashed(request.token), now: Self.now()),
                let activation = try await store.activation(id: activationId)
            else {
                throw ManagerError(
                    .notFound, .notFound,
                    "this link was used already or ran out (30 days); to remove a device, sign in at /account or ask your administrator"
                )
            }
            let device = activation.deviceId
            if let device { try await store.revokeDevice(device) }
            try await store.markRevoked(activationId: activationId)
            try await store.recordAudit(
                AuditEvent(
                    .revocation, email: activation.email, activationId: activationId,
                    detail: "the address's owner cancelled the registration of \"\(activation.alias)\" (not me)"
                        + (device.map { ", and its device \($0) was removed" } ?? ""),
                    actor: "the account's address"))
            return (activation.email, activation.alias, device)
        }
        logger.notice("a registration was cancelled from its notice mail", metadata: ["email": "\(email)"])
        return RegistrationCancellationMessage(
            message: device == nil
                ? "Cancelled: the activation \"\(alias)\" of \(email) no longer works."
                : "Cancelled: the activation \"\(alias)\" of \(email) no longer works, and the device that took it can no longer log in or approve. Tell your administrator: someone registered it in your name."
        )
    }
}
