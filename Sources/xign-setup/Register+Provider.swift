import ArgumentParser
import FoundationEssentials
import XignCore
import XignProtocol
import XignTerminal

#if canImport(Glibc)
import Glibc
#endif

extension Register {
    /// OneWelcome's browser identity provider from the terminal: the link (and its QR code, for a phone) to the
    /// provider's sign-in, a wait for the person to come back, and then this machine's activation with the PIN chosen
    /// here. No mail and no activation data in argv or on disk.
    func registerThroughProvider(
        _ provider: String?, sdk: XignSdk, parameters: RegistrationParameters, output: Output
    ) throws {
        let registration = try sdk.registry.startProviderRegistrationSynchronous(data: parameters, provider: provider)
        var result: ProviderRegistrationResultMessage
        if let link = registration.authorizationURL {
            result = try waitForBrowserSignIn(link, registration, sdk: sdk, output: output)
        } else {
            try answerCustomSteps(registration, sdk: sdk, output: output)
            result = try sdk.registry.waitForProviderRegistrationSynchronous(registration, waitMilliseconds: 0)
        }
        switch result.outcome {
        case .pending:
            throw XignSdkError(
                .sessionExpired,
                "the registration ran out (10 minutes) before the sign-in was confirmed with the code; start again")
        case .refused:
            throw XignSdkError(
                .managerRejectedRequest,
                "the registration was refused: \(DisplayText.sanitized(result.message ?? "no reason given", keepingLineFeeds: false))"
            )
        case .registered:
            break
        }
        let login = result.loginName.map { " with the login name \($0)" } ?? ""
        output.say(
            "Registered as \(DisplayText.sanitized(result.email ?? "?", keepingLineFeeds: false))\(login). Activating this machine…"
        )
        let devices = try common.sdkForNewKeys(user: nil)
        let personalizer = devices.personalizer(managerURLOverride: nil)
        guard
            case .newPersonalization(let activation) = try personalizer.decryptSynchronous(result, of: registration)
        else {
            throw XignSdkError(.invalidManagerResponse, "the new activation is not fresh; ask your administrator")
        }
        let entity = try personalizer.personalizeIdentityManagerSynchronous(parameters: activation).entity
        output.say(
            "Personalized: \"\(entity.alias)\" of \(entity.accountEmail) for local user \(entity.localUser) (\(entity.keyKind) key)."
        )
        output.emit([
            "status": .string("personalized"), "email": .string(entity.accountEmail),
            "loginName": result.loginName.map { .string($0) } ?? .null, "idmIdentifier": .string(entity.idmIdentifier),
            "localUser": .string(entity.localUser), "keyKind": .string(entity.keyKind.rawValue),
        ])
    }

    /// The link and the code, then a wait for as long as the registration lives (10 minutes): the person may take
    /// that long at the provider. Each wait is a long poll within the client's timeout; a manager that cannot be
    /// reached for a moment is asked again until the registration runs out.
    private func waitForBrowserSignIn(
        _ link: String, _ registration: Registry.ProviderRegistration, sdk: XignSdk, output: Output
    ) throws -> ProviderRegistrationResultMessage {
        let code = registration.confirmationCode ?? ""
        let spaced = code.count == 6 ? "\(code.prefix(3)) \(code.suffix(3))" : code
        output.say("Sign in at your organization's identity provider: open this link in a browser.")
        output.say(link)
        if !noQr && !common.json {
            drawQR(link, style: .utf8, caption: "Or scan it with your phone:", besideLines: 0)
        }
        output.say("After the sign-in, the manager's page asks for this code: \(spaced)")
        output.say("Type it there yourself, and give it to nobody: whoever types it gets this registration.")
        output.emit([
            "status": .string("waiting"), "authorizationUrl": .string(link), "confirmationCode": .string(code),
        ])
        output.say("Waiting for the sign-in and the code (up to 10 minutes; Ctrl-C stops)…")
        var unreachableSaid = false
        while true {
            do {
                let result = try sdk.registry.waitForProviderRegistrationSynchronous(registration)
                if result.outcome != .pending { return result }
            } catch let error as XignSdkError where error.errorCode.leavesTheManagerUnavailable {
                if !unreachableSaid {
                    Terminal.write("The manager does not answer now (\(error.message)); still waiting…\n")
                    unreachableSaid = true
                }
                usleep(2_000_000)
            }
            guard Int64(Date().timeIntervalSince1970 * 1000) < registration.expiresAt else {
                return ProviderRegistrationResultMessage(
                    nonce: "", registrationId: registration.registrationId, outcome: .pending)
            }
        }
    }

    /// A custom provider's steps, each with a line the person types (the service's text says what it wants).
    private func answerCustomSteps(_ registration: Registry.ProviderRegistration, sdk: XignSdk, output: Output) throws {
        var step = registration.customStep ?? .finish
        var prompt = "Registration data for the organization's service: "
        while true {
            let data: String
            do { data = try Terminal.ask(prompt) } catch {
                throw XignSdkError(.invalidInput, "cannot read the registration data: \(error)")
            }
            let answer = try sdk.registry.customStepSynchronous(
                registration, step: step, data: data.isEmpty ? nil : data)
            if let info = answer.info { output.say(DisplayText.sanitized(info, keepingLineFeeds: false)) }
            guard answer.outcome == .pending, let next = answer.nextStep else { return }
            (step, prompt) = (next, "Your answer: ")
        }
    }
}
