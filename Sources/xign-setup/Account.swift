import ArgumentParser
import FoundationEssentials
import XignCore
import XignProtocol
import XignTerminal

/// The api access processes: each confirms with this machine's device key and the current PIN first.
struct ApiAccessOptions: ParsableArguments {
    @OptionGroup var common: CommonOptions
    @OptionGroup var pins: PinSource
    @Argument(
        help: "The idmIdentifier, as `xign-setup list` shows it; may be left out when this machine holds one enrolment."
    )
    var idmIdentifier: String?

    /// Confirms the process with device and PIN; a wrong PIN ends the command with the lockout (exit 2).
    func authenticate(_ process: ApiAccessProcess, sdk: XignSdk, output: Output) throws -> ApiAccessAuthenticationResult
    {
        let entity = try enrolment(sdk)
        let authenticator = sdk.authenticator
        let request = try authenticator.startApiAccessSynchronous(process, idmIdentifier: entity.idmIdentifier)
        let signed = try authenticator.signWithDeviceAndPinSynchronous(
            request: request, pin: { try pins.read("Current PIN of \(entity.accountEmail): ") },
            incomplete: XignSdkError(
                .invalidManagerResponse, "the manager asks for information a \(process.rawValue) cannot give"))
        let result = try authenticator.finishApiAccessSynchronous(userInfo: signed)
        if case .lockout(let lock, _) = result { throw reportLockout(lock, output: output) }
        return result
    }

    private func enrolment(_ sdk: XignSdk) throws -> IdentityManagerEntity {
        if let idmIdentifier { return try sdk.entity(idmIdentifier) }
        let entries = try sdk.store.list()
        guard entries.count == 1, let only = entries.first else {
            throw ValidationError(
                entries.isEmpty
                    ? "this machine holds no enrolment; personalize it first"
                    : "this machine holds \(entries.count) enrolments; name one: \(entries.map(\.idmIdentifier).joined(separator: ", "))"
            )
        }
        return only
    }

    var interactive: Bool { pins.descriptor == nil && Terminal.isInteractive }
}

struct ChangePin: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Change the PIN, confirmed with the current one.",
        discussion:
            "The new PIN holds for every device of the account. A wrong current PIN counts toward the lockout like a failed login."
    )

    @OptionGroup var options: ApiAccessOptions

    func run() throws {
        let output = Output(json: options.common.json)
        try reportingErrors(json: options.common.json) {
            let sdk = try options.common.sdk(user: nil)
            guard case .apiAccessChangePin(let change) = try options.authenticate(.changePin, sdk: sdk, output: output)
            else {
                throw XignSdkError(
                    .invalidManagerResponse, "the manager answered the PIN change with the result of another process")
            }
            try options.pins.choose(change.pinSpec, prompt: "New PIN", interactive: options.interactive)
            let activations = try sdk.personalizer().finishChangePin(request: change)
            output.say(
                activations == 1
                    ? "PIN changed."
                    : "PIN changed for all \(activations) activations of the account: every device of it uses the new PIN from now on."
            )
            output.emit([
                "status": .string("changed"), "idmIdentifier": .string(change.idmIdentifier),
                "activations": .int(activations),
            ])
        }
    }
}

struct NewActivation: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "new-activation",
        abstract: "Request a new activation of the account for another machine; this one keeps working.",
        discussion:
            "Personalize the other machine with the link (or the QR code, or the mail) and the activation PIN chosen here."
    )

    @OptionGroup var options: ApiAccessOptions
    @Option(help: "A name for the new activation.") var alias: String?
    @Flag(help: "Also mail the activation data to the account's address.") var sendEmail = false
    @Flag(help: "Print the link only, no QR code.") var noQr = false

    func run() throws {
        let output = Output(json: options.common.json)
        try reportingErrors(json: options.common.json) {
            let sdk = try options.common.sdk(user: nil)
            guard
                case .apiAccessRequestNewActivationData(let trigger) = try options.authenticate(
                    .requestNewActivation, sdk: sdk, output: output)
            else {
                throw XignSdkError(
                    .invalidManagerResponse,
                    "the manager answered the new activation with the result of another process")
            }
            if let alias {
                let check = trigger.setAlias(alias)
                guard check == .valid else { throw XignSdkError(.invalidInput, trigger.validatorAlias.explain(check)) }
            }
            try options.pins.choose(
                trigger.pinSpec, prompt: "Activation PIN for the new machine", interactive: options.interactive)
            trigger.shouldSendEmail = sendEmail
            let made = try sdk.personalizer().finishRequestNewActivationData(request: trigger)
            output.say(
                "New activation \"\(made.alias)\". On the other machine, run `xign-setup personalize` with this link:")
            output.say(made.payload.deepLink)
            if !noQr && !options.common.json {
                drawQR(made.payload.deepLink, style: .utf8, caption: nil, besideLines: 1)
            }
            if made.mailQueued { output.say("The activation data was also mailed to the account's address.") }
            output.emit([
                "status": .string("requested"), "activationId": .string(made.activationId),
                "alias": .string(made.alias),
                "activationData": .string(made.payload.deepLink), "mailQueued": .bool(made.mailQueued),
            ])
        }
    }
}

struct RevokeDevice: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke-device",
        abstract:
            "Remove another device of the account, such as a lost phone or a stolen laptop: it stops working at once.",
        discussion: "Confirmed with this machine and the current PIN. `xign-setup list --devices` shows the device ids."
    )

    @OptionGroup var options: ApiAccessOptions
    @Argument(help: "The id of the device to remove.") var deviceId: String

    func run() throws {
        let output = Output(json: options.common.json)
        try reportingErrors(json: options.common.json) {
            guard deviceId.count == 32, deviceId.allSatisfy({ $0.isHexDigit && !$0.isUppercase }) else {
                throw ValidationError("a device id is 32 hex digits, as `xign-setup list --devices` prints it")
            }
            let sdk = try options.common.sdk(user: nil)
            guard
                case .apiAccessRevokeDevice(let revocation) = try options.authenticate(
                    .revokeDevice, sdk: sdk, output: output)
            else {
                throw XignSdkError(
                    .invalidManagerResponse, "the manager answered the removal with the result of another process")
            }
            try sdk.personalizer().finishRevokeDevice(request: revocation, deviceId: deviceId)
            output.say("Removed device \(deviceId); it can no longer log in or approve.")
            output.emit(["status": .string("revoked"), "deviceId": .string(deviceId)])
        }
    }
}

struct DeleteAccount: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Delete the account at the manager: every device of it stops working, and this machine forgets it.",
        discussion:
            "Confirmed with the current PIN. Only the manager's audit keeps a note that the account was deleted."
    )

    @OptionGroup var options: ApiAccessOptions
    @Flag(help: "Do not ask; needed when there is no terminal.") var yes = false

    func run() throws {
        let output = Output(json: options.common.json)
        // Before the PIN is asked: a script that forgot --yes must not spend an attempt.
        if !yes && !Terminal.isInteractive {
            throw ValidationError("pass --yes to delete without a terminal to confirm at")
        }
        try reportingErrors(json: options.common.json) {
            let sdk = try options.common.sdk(user: nil)
            guard case .apiAccessDelete(let deletion) = try options.authenticate(.delete, sdk: sdk, output: output)
            else {
                throw XignSdkError(
                    .invalidManagerResponse, "the manager answered the deletion with the result of another process")
            }
            if !yes {
                let typed = try Terminal.ask(
                    "This deletes \(deletion.accountEmail) and all its devices. Type the address to confirm: ")
                guard typed.trimmingCharacters(in: .whitespaces).lowercased() == deletion.accountEmail.lowercased()
                else {
                    output.say("Nothing was deleted.")
                    output.emit(["status": .string("cancelled")])
                    return
                }
            }
            let devices = try sdk.personalizer().finishDeletion(request: deletion)
            output.say("Deleted \(deletion.accountEmail) with \(devices) device(s); this machine forgot it.")
            output.emit([
                "status": .string("deleted"), "idmIdentifier": .string(deletion.idmIdentifier),
                "revokedDevices": .int(devices),
            ])
        }
    }
}

struct AddFactor: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add-factor",
        abstract:
            "Add the fingerprint (fprintd) as a factor of this device, for roles that ask for device+pin+biometric.",
        discussion:
            "Enrol a finger with `fprintd-enroll USER` first. Confirmed with the current PIN and a finger on the reader."
    )

    // Before the options: the optional idmIdentifier comes after it.
    @Argument(help: "The factor to add: biometric.") var factor: AuthenticatorType
    @OptionGroup var options: ApiAccessOptions

    func validate() throws {
        guard factor == .biometric else {
            throw ValidationError("only biometric can be added; device and PIN come with every enrolment")
        }
    }

    func run() throws {
        let output = Output(json: options.common.json)
        try reportingErrors(json: options.common.json) {
            let sdk = try options.common.sdk(user: nil)
            guard case .apiAccessAddFactor(let add) = try options.authenticate(.addFactor, sdk: sdk, output: output)
            else {
                throw XignSdkError(
                    .invalidManagerResponse, "the manager answered the add factor with the result of another process")
            }
            let factors = try sdk.personalizer().finishAddBiometricFactor(request: add) { Terminal.write($0 + "\n") }
            output.say("This device now signs with \(factors.map(\.rawValue).joined(separator: ", ")).")
            output.emit([
                "status": .string("added"), "idmIdentifier": .string(add.idmIdentifier),
                "factors": .array(factors.map { .string($0.rawValue) }),
            ])
        }
    }
}

extension AuthenticatorType: ExpressibleByArgument {}
