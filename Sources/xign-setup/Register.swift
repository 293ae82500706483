import ArgumentParser
import FoundationEssentials
import XignCore
import XignProtocol
import XignTerminal

struct Register: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create an account at an identity manager; the activation data arrives by mail.",
        discussion:
            "Asks for what the manager requires. Without a terminal, give the attributes as options and the PIN on --pin-stdin."
    )

    @OptionGroup var common: CommonOptions
    @OptionGroup var pins: PinSource

    @Option(help: "The manager's URL (default: manager_url from the config).") var manager: String?
    @Option(help: "Your email address.") var email: String?
    @Option(help: "A name for this first activation.") var alias: String?
    @Option(help: "Identification category id, when the manager offers several.") var category: String?
    @Option(name: .customLong("attribute"), help: "Another attribute as NAME=VALUE (givenName, familyName, …).")
    var attributes: [String] = []
    @Option(help: "Service-mapping id of a linked service that should receive --user-attribute values.")
    var serviceMappingId: String?
    @Option(name: .customLong("user-attribute"), help: "An arbitrary attribute for the linked service, KEY=VALUE.")
    var userAttributes: [String] = []
    @Option(
        help: ArgumentHelp(
            "Register through your organization's identity provider (its name, or 'default'): sign in there in a browser, and this machine is activated when you come back.",
            valueName: "name"))
    var identityProvider: String?
    @Flag(help: "With --identity-provider: do not draw the link's QR code.") var noQr = false

    func run() throws {
        try reportingErrors(json: common.json) { try register(Output(json: common.json)) }
    }

    private func register(_ output: Output) throws {
        let sdk = try common.sdk(user: nil)
        guard let url = try manager.map(parseManagerURL) ?? sdk.configuration.managerURL else {
            throw ValidationError("name the manager with --manager URL or manager_url in \(common.config)")
        }
        try url.checkTransportPolicyAsSdkError()
        let parameters = try sdk.registry.initializationSynchronous(url: url, serviceMappingId: serviceMappingId)
        let interactive = pins.descriptor == nil && Terminal.isInteractive

        try pins.choose(parameters.pinSpec, prompt: "Choose an activation PIN", interactive: interactive)
        if let identityProvider {
            guard email == nil, attributes.isEmpty else {
                throw ValidationError("with --identity-provider the provider gives the address and the attributes")
            }
            if let alias {
                let result = parameters.setAlias(alias)
                guard result == .valid else { throw ValidationError(parameters.validatorAlias.explain(result)) }
            }
            return try registerThroughProvider(
                identityProvider == "default" ? nil : identityProvider, sdk: sdk, parameters: parameters,
                output: output)
        }
        let category = try chooseCategory(parameters, interactive: interactive)
        var given = try namedValues(attributes, option: "--attribute")
        if let email { given["email"] = email }
        for name in given.keys where category.info[name] == nil {
            throw ValidationError("the manager does not ask for '\(name)' in category \(category.id)")
        }
        for info in category.info.attributes { try fill(info, given: given[info.name], interactive: interactive) }
        if let alias {
            let result = parameters.setAlias(alias)
            guard result == .valid else { throw ValidationError(parameters.validatorAlias.explain(result)) }
        }
        if !userAttributes.isEmpty {
            parameters.setArbitraryUserAttributes(try namedValues(userAttributes, option: "--user-attribute"))
        }

        while true {
            switch try sdk.registry.registerSynchronous(data: parameters) {
            case .success(let managerUrl):
                let address = category.info.email?.value ?? "your address"
                output.say("Registered at \(managerUrl). The activation mail is on its way to \(address).")
                output.say(
                    "Activate this machine with: xign-setup personalize --mail FILE (or paste the link from the mail)")
                output.emit([
                    "status": .string("registered"), "managerUrl": .string(managerUrl), "email": .string(address),
                ])
                return
            case .failure(let rejected):
                var problems: [String: JSONValue] = [:]
                for info in category.info.attributes where info.error != .none {
                    problems[info.name] = .string(info.error.rawValue)
                    Terminal.write("\(info.name): \(Self.explain(info.error))\n")
                }
                if let pinError = rejected.pinError {
                    problems["pin"] = .string(pinError.rawValue)
                    Terminal.write("PIN: \(rejected.pinSpec.explain(pinError))\n")
                }
                if let aliasError = rejected.aliasError {
                    problems["alias"] = .string(aliasError.rawValue)
                    Terminal.write("alias: the manager refused it\n")
                }
                guard interactive else {
                    output.emit(["status": .string("rejected"), "errors": .object(problems)])
                    throw ExitCode.registrationRejected
                }
                // Ask again for what was refused, then retry.
                if rejected.pinError != nil {
                    try pins.choose(rejected.pinSpec, prompt: "Choose an activation PIN", interactive: true)
                }
                for info in category.info.attributes where info.error != .none {
                    try fill(info, given: nil, interactive: true, force: true)
                }
            }
        }
    }

    static func explain(_ error: AttributeErrorCode) -> String {
        switch error {
        case .none: return "accepted"
        case .invalid: return "not in a valid form"
        case .notAvailable: return "already in use or blocked; use another"
        case .required: return "required"
        }
    }

    private func chooseCategory(
        _ parameters: RegistrationParameters, interactive: Bool
    ) throws -> IdentificationCategory {
        if let category {
            guard let chosen = parameters.categories.first(where: { $0.id == category }) else {
                throw ValidationError(
                    "the manager offers the categories \(parameters.categories.map(\.id).joined(separator: ", ")), not '\(category)'"
                )
            }
            parameters.setSelection(chosen)
            return chosen
        }
        if let selected = parameters.selection { return selected }
        guard interactive else {
            throw ValidationError(
                "the manager offers several categories (\(parameters.categories.map(\.id).joined(separator: ", "))); pick one with --category"
            )
        }
        while true {
            let answer = try Terminal.ask("Category (\(parameters.categories.map(\.id).joined(separator: ", "))): ")
            if let chosen = parameters.categories.first(where: { $0.id == answer }) {
                parameters.setSelection(chosen)
                return chosen
            }
        }
    }

    private func fill(_ info: RegistrationInformation, given: String?, interactive: Bool, force: Bool = false) throws {
        if let given {
            let result = info.setValue(value: given)
            guard result == .valid else { throw ValidationError("\(info.name): \(Self.explain(result))") }
            if !force { return }
        }
        guard interactive else {
            if info.isRequired {
                throw ValidationError(
                    "the manager requires \(info.name); pass it with \(info.name == "email" ? "--email" : "--attribute \(info.name)=VALUE")"
                )
            }
            return
        }
        while true {
            let answer = try Terminal.ask(
                info.isRequired ? "\(info.name): " : "\(info.name) (optional, Enter to skip): ")
            if answer.isEmpty && !info.isRequired { return }
            let result = info.setValue(value: answer)
            if result == .valid { return }
            Terminal.write("The \(info.name) \(Self.explain(result)).\n")
        }
    }

    static func explain(_ result: EmailValidator.ResultCode) -> String {
        switch result {
        case .valid: return "accepted"
        case .empty: return "must not be empty"
        case .invalid: return "is not in a valid form"
        }
    }

    private func namedValues(_ items: [String], option: String) throws -> [String: String] {
        var values: [String: String] = [:]
        for item in items {
            guard let equals = item.firstIndex(of: "="), equals != item.startIndex else {
                throw ValidationError("\(option) takes NAME=VALUE, not '\(item)'")
            }
            values[String(item[..<equals])] = String(item[item.index(after: equals)...])
        }
        return values
    }
}
