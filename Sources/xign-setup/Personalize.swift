import ArgumentParser
import FoundationEssentials
import XignCore
import XignProtocol
import XignTerminal

struct Personalize: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Activate this machine for a user with the activation data from the mail.",
        discussion: """
            Give the link from the activation mail, or the mail file with --mail. Without a terminal, pass
            PINs with --pin-stdin (activation PIN first; then a new PIN for --on-existing new-activation, or the
            existing activation's PIN for --on-merge merge) and decide with --on-existing / --on-merge.
            """,
        aliases: ["activate"]
    )

    enum ExistingChoice: String, ExpressibleByArgument, CaseIterable {
        case override
        case newActivation = "new-activation"
        case cancel
    }

    enum MergeChoice: String, ExpressibleByArgument, CaseIterable {
        case merge, replace, cancel
    }

    @OptionGroup var common: CommonOptions
    @OptionGroup var pins: PinSource

    @Argument(help: "The xign://personalize link or https App-Link; '-' reads it from standard input.") var payload:
        String?
    @Option(help: "Read the activation data from this mail file.") var mail: String?
    @Option(help: "Use this manager's scheme, host and port instead of the activation data's (the path is kept).")
    var managerUrl: String?
    @Option(help: "The local user this activation is for (default: you).") var user: String?
    @Option(help: "When the activation is already in use: override it, add a new activation, or cancel.")
    var onExisting: ExistingChoice?
    @Option(help: "For an organization invite on a machine that holds another account: replace, or cancel.")
    var onMerge: MergeChoice?
    @Option(help: "Alias of a new activation (with new-activation).") var alias: String?
    @Flag(help: "Mail a backup of a new activation's data (with new-activation).") var sendEmail = false
    @Flag(help: "Do not draw the activation QR code.") var noQr = false
    @Option(help: "QR style: utf8, utf8-inverted or ansi.") var style: QRStyle = .utf8

    func validate() throws {
        if (payload == nil) == (mail == nil) {
            throw ValidationError("give the activation link or --mail FILE (one of them)")
        }
        if payload == "-" && pins.pinStdin {
            throw ValidationError("standard input cannot carry both the link and the PIN; use --pin-fd")
        }
    }

    func run() throws {
        try reportingErrors(json: common.json) { try personalize(Output(json: common.json)) }
    }

    private func readActivationData() throws -> PersonalizationInitializationData {
        if let mail {
            let data: Data?
            do { data = try AtomicFile.read(mail, limit: 256 * 1024) } catch {
                throw XignSdkError(.activationDataInvalid, "cannot read the mail file: \(error)")
            }
            guard let data else { throw XignSdkError(.activationDataInvalid, "the mail file \(mail) does not exist") }
            return try PersonalizationInitializationData(parsingMail: String(decoding: data, as: UTF8.self))
        }
        if payload == "-" {
            do {
                return try PersonalizationInitializationData(
                    parsing: try Terminal.readLine(limit: PersonalizationPayload.maximumLength))
            } catch let
                error as Terminal.InputError
            {
                throw XignSdkError(.activationDataInvalid, "cannot read the activation link: \(error)")
            }
        }
        return try PersonalizationInitializationData(parsing: payload ?? "")
    }

    private func personalize(_ output: Output) throws {
        let data = try readActivationData()
        let sdk = try common.sdkForNewKeys(user: user)
        let override = try managerUrl.map(parseManagerURL)
        let personalizer = sdk.personalizer(managerURLOverride: override)
        let url = override.map { data.payload.managerURL.overriding(with: $0) } ?? data.payload.managerURL
        try url.checkTransportPolicyAsSdkError()
        let interactive = pins.descriptor == nil && Terminal.isInteractive
        if !noQr && !common.json {
            // Beside it: its caption, the PIN prompt and the line the PIN is typed on.
            drawQR(
                data.payload.deepLink, style: style,
                caption: "Activation QR code (scan it with the XignIn app to activate a phone instead):",
                besideLines: 3)
        }

        output.say("Activating for local user \(sdk.localUser) at \(url).")
        let pin = try pins.read("Activation PIN: ")
        let result: PersonalizationResult
        var outcome = ""
        switch try personalizer.decryptPersonalizationInitializationDataSynchronous(data: data, pin: pin) {
        case .newPersonalization(let parameters):
            outcome = "newPersonalization"
            output.say("New activation \"\(parameters.activationAlias)\" of \(parameters.accountEmail).")
            result = try personalizer.personalizeIdentityManagerSynchronous(parameters: parameters)
        case .alreadyPersonalized(let parameters):
            outcome = "alreadyPersonalized"
            output.say("This machine already holds \"\(parameters.activationAlias)\" of \(parameters.accountEmail).")
            let choice =
                try onExisting
                ?? ask(
                    "Create a new device key for it (override) or leave it (cancel)?", [.override, .cancel],
                    interactive: interactive)
            guard choice == .override else { return cancelled(output, outcome) }
            result = try personalizer.personalizeIdentityManagerSynchronous(parameters: parameters)
        case .rePersonalization(let parameters, let trigger):
            outcome = "rePersonalization"
            output.say(
                "\"\(parameters.activationAlias)\" of \(parameters.accountEmail) is already personalized on a device (\(parameters.personalizedDeviceId ?? "unknown"))."
            )
            output.say(
                "override: move it to this machine; the other device stops working. new-activation: add a second activation for this machine."
            )
            switch try onExisting ?? ask("What now?", ExistingChoice.allCases, interactive: interactive) {
            case .cancel:
                return cancelled(output, outcome)
            case .override:
                result = try personalizer.personalizeIdentityManagerSynchronous(parameters: parameters)
            case .newActivation:
                try pins.choose(trigger.pinSpec, prompt: "New activation PIN", interactive: interactive)
                if let alias {
                    let check = trigger.setAlias(alias)
                    guard check == .valid else { throw ValidationError(trigger.validatorAlias.explain(check)) }
                }
                trigger.shouldSendEmail = sendEmail
                result = try personalizer.personalizeIdentityManagerSynchronous(trigger: trigger)
            }
        case .mergePersonalization(let parameters, let merge):
            outcome = "mergePersonalization"
            output.say(
                "This is \(merge.organization)'s invite for \(merge.invitedEmail), and this machine holds the account \(merge.existingAccountEmail)."
            )
            output.say(
                "merge: add \(merge.invitedEmail) to \(merge.existingAccountEmail), confirmed with this machine and that account's PIN."
            )
            output.say(
                "replace: make the invite an account of its own and use it here instead (\(merge.existingAccountEmail) stays usable elsewhere)."
            )
            switch try onMerge ?? ask("What now?", MergeChoice.allCases, interactive: interactive) {
            case .cancel:
                return cancelled(output, outcome)
            case .replace:
                result = try personalizer.personalizeIdentityManagerSynchronous(parameters: parameters)
            case .merge:
                return try confirmMerge(merge, sdk: sdk, output: output)
            }
        case .lockout(let lock, _):
            throw reportLockout(lock, output: output)
        }
        let entity = result.entity
        output.say(
            "Personalized: \(entity.idmIdentifier) — \"\(entity.alias)\" of \(entity.accountEmail) for local user \(entity.localUser) (\(entity.keyKind) key"
                + (result.keyAttestation.map { ", \($0)" } ?? "") + ")."
        )
        output.emit([
            "status": .string("personalized"), "outcome": .string(outcome),
            "idmIdentifier": .string(entity.idmIdentifier),
            "activationId": .string(entity.activationId), "alias": .string(entity.alias),
            "email": .string(entity.accountEmail),
            "localUser": .string(entity.localUser), "keyKind": .string(entity.keyKind.rawValue),
            "managerUrl": .string(entity.managerURL.description),
            "keyAttestation": result.keyAttestation.map { .string($0) } ?? .null,
        ])
    }

    /// The merge process: an authentication with the existing enrolment's device and PIN.
    private func confirmMerge(_ merge: AuthenticationInitializationDataWithSession, sdk: XignSdk, output: Output) throws
    {
        let authenticator = sdk.authenticator
        let request = try authenticator.startAuthenticationSynchronous(data: merge)
        let signed = try authenticator.signWithDeviceAndPinSynchronous(
            request: request, pin: { try pins.read("PIN of \(merge.existingAccountEmail): ") },
            incomplete: XignSdkError(.invalidManagerResponse, "the manager asks for information the merge cannot give"))
        switch try authenticator.finishMergeSynchronous(userInfo: signed) {
        case .apiAccessMergeComplete(let idmIdentifier):
            output.say(
                "Merged: \(merge.invitedEmail) now belongs to \(merge.existingAccountEmail). The invite's activation data is void; delete the mail."
            )
            output.emit([
                "status": .string("merged"), "outcome": .string("mergePersonalization"),
                "idmIdentifier": .string(idmIdentifier),
                "email": .string(merge.existingAccountEmail), "mergedEmail": .string(merge.invitedEmail),
            ])
        case .lockout(let lock, _):
            throw reportLockout(lock, output: output)
        }
    }

    private func cancelled(_ output: Output, _ outcome: String) {
        output.say("Nothing changed.")
        output.emit(["status": .string("cancelled"), "outcome": .string(outcome)])
    }

    private func ask<Choice: RawRepresentable<String>>(
        _ question: String, _ choices: [Choice], interactive: Bool
    ) throws -> Choice {
        guard interactive else {
            throw ValidationError(
                "\(question) Decide with --on-existing or --on-merge (\(choices.map(\.rawValue).joined(separator: ", ")))."
            )
        }
        while true {
            let answer = try Terminal.ask("\(question) [\(choices.map(\.rawValue).joined(separator: "/"))]: ")
            if let choice = choices.first(where: { $0.rawValue == answer }) { return choice }
        }
    }

}
