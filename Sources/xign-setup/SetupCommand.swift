import ArgumentParser
import FoundationEssentials
import XignCore
import XignDevice
import XignLogin
import XignProtocol
import XignTerminal

#if canImport(Glibc)
import Glibc
#endif

@main
struct SetupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "xign-setup",
        abstract: "Register with an xign identity manager and make this machine an XignIn device.",
        discussion: """
            Exit status: 0 success, 1 error, 2 locked out, 3 manager unreachable, 4 security level insufficient,
            5 registration rejected, 64 bad usage.
            """,
        version: XignCoreVersion.string,
        subcommands: [
            Register.self, Personalize.self, List.self, ChangePin.self, NewActivation.self, AddFactor.self, RevokeDevice.self, DeleteAccount.self,
            QR.self, Remove.self,
            Doctor.self,
            Host.self, Approve.self, Agent.self,
        ]
    )
}

/// Options every command that touches the manager or the state shares.
struct CommonOptions: ParsableArguments {
    @Option(help: "Config file.")
    var config: String = ClientConfiguration.defaultPath

    @Option(help: "Keep state here instead of state_dir from the config (for tests and demos).")
    var stateDir: String?

    @Flag(help: "Print one JSON object on stdout instead of text.")
    var json = false

    func loadConfiguration() throws -> ClientConfiguration {
        var configuration = try ClientConfiguration.load(path: config)
        if let stateDir { configuration.stateDirectory = stateDir }
        return configuration
    }

    func sdk(user: String?) throws -> XignSdk {
        TPMLog.quiet()
        return try XignSdk(configuration: try loadConfiguration(), localUser: user ?? Self.invokingUser())
    }

    /// An XignSdk for a command that makes a key: says so when the key will not be in the TPM.
    func sdkForNewKeys(user: String?) throws -> XignSdk {
        let sdk = try sdk(user: user)
        if let warning = sdk.newKeyKind().warning { Terminal.write("warning: \(warning)\n") }
        return sdk
    }

    /// Who approves logins: this machine's state directly as root, else xignd for the caller's own user.
    func approver(user: String?, xigndSocket: String) throws -> any LoginApprover {
        if geteuid() == 0 { return SdkLoginApprover(sdk: try sdk(user: user)) }
        return DaemonLoginApprover(user: user ?? Self.invokingUser(), socketPath: xigndSocket)
    }

    /// The user who ran the command, also through sudo.
    static func invokingUser() -> String {
        if getuid() == 0, let sudoUser = ProcessInfo.processInfo.environment["SUDO_USER"], !sudoUser.isEmpty { return sudoUser }
        guard let entry = getpwuid(getuid()), let name = entry.pointee.pw_name else { return "uid\(getuid())" }
        return String(cString: name)
    }
}

/// Where a non-interactive PIN comes from: never argv, never the environment.
struct PinSource: ParsableArguments {
    @Flag(help: "Read PINs from standard input, one per line, instead of prompting.")
    var pinStdin = false

    @Option(help: "Read PINs from this open file descriptor, one per line.")
    var pinFd: Int32?

    var descriptor: Int32? { pinFd ?? (pinStdin ? STDIN_FILENO : nil) }

    func validate() throws {
        if pinStdin && pinFd != nil { throw ValidationError("use either --pin-stdin or --pin-fd") }
        if let pinFd, pinFd < 0 { throw ValidationError("--pin-fd needs a file descriptor number") }
    }

    /// Asks for a new PIN until `spec` accepts it; at a terminal the PIN is typed twice.
    func choose(_ spec: PinSpecification, prompt: String, interactive: Bool) throws {
        while true {
            let pin = try read("\(prompt) (\(spec.minLength)–\(spec.maxLength) digits): ")
            let result = spec.setPin(pin)
            if result == .valid {
                guard interactive else { return }
                if try read("Repeat the PIN: ") == pin { return }
                spec.setPin("")
                Terminal.write("The PINs differ.\n")
                continue
            }
            guard interactive else { throw XignSdkError(.pinPolicyViolation, spec.explain(result)) }
            Terminal.write(spec.explain(result) + "\n")
        }
    }

    /// The next PIN: a line from the descriptor, or a prompt with echo off.
    func read(_ prompt: String) throws -> String {
        do {
            if let descriptor { return try Terminal.readLine(from: descriptor, limit: 128) }
            guard Terminal.isInteractive else {
                throw XignSdkError(.invalidInput, "no terminal to ask for the PIN; pass --pin-stdin or --pin-fd N")
            }
            return try Terminal.askSecret(prompt)
        } catch let error as Terminal.InputError {
            throw XignSdkError(.invalidInput, "cannot read the PIN: \(error)")
        }
    }
}

/// Draws `payload` as a QR code fitted to the terminal, with `besideLines` left for what follows; when it cannot
/// fit, says so and goes on (the link is printed too).
func drawQR(_ payload: String, style: QRStyle, caption: String?, besideLines: Int) {
    do {
        let text = try QRRenderer.render(payload, style: style, columns: Terminal.columns() ?? 80, rows: Terminal.rows(), besideLines: besideLines)
        if let caption { print(caption) }
        print(text, terminator: "")
    } catch {
        Terminal.write("(QR code not shown: \(error))\n")
    }
}

/// `print` for text that quotes the manager or what it wrote into the state: no control characters (DisplayText).
func printSanitized(_ text: String) {
    print(DisplayText.sanitized(text))
}

/// Prints text or JSON for a command's result.
struct Output {
    let json: Bool

    func say(_ text: String) {
        if !json { printSanitized(text) }
    }

    func emit(_ fields: [String: JSONValue]) {
        guard json else { return }
        let encoder = JSONEncoder.canonical
        encoder.outputFormatting.insert(.prettyPrinted)
        print(String(decoding: (try? encoder.encode(fields)) ?? Data("{}".utf8), as: UTF8.self))
    }
}

enum JSONValue: Encodable {
    case string(String)
    case bool(Bool)
    case int(Int)
    case array([JSONValue])
    case object([String: JSONValue])
    case null

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let value): try container.encode(value)
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        case .null: try container.encodeNil()
        }
    }
}

/// A wrong PIN: says until when and what to do; the exit status is 2.
func reportLockout(_ lock: LockoutAttemptInformation, output: Output) -> ExitCode {
    let when = lock.isPermanent ? "permanently" : "until \(lock.lockedUntil.localDescription)"
    Terminal.write("Wrong PIN. The activation is locked \(when) (\(lock.failedAttempts) failed attempt(s)).\n")
    Terminal.write(
        lock.isPermanent
            ? "Register again with `xign-setup register`, or ask your administrator to unlock it.\n"
            : "Run the same command again after that time.\n")
    output.emit([
        "status": .string("lockout"), "isPermanent": .bool(lock.isPermanent),
        "lockedUntil": .string(lock.lockedUntil.iso8601), "failedAttempts": .int(lock.failedAttempts),
    ])
    return .lockedOut
}

/// Maps an error to a message on stderr and the documented exit status.
func exitCode(for error: any Error, json: Bool) -> ExitCode {
    let status: ExitCode
    var message = "\(error)"
    switch error {
    case let sdk as XignSdkError:
        switch sdk.errorCode {
        case .lockedOut:
            status = .lockedOut
            if json, let lock = sdk.lockout {
                Output(json: true).emit([
                    "status": .string("lockedOut"), "isPermanent": .bool(lock.isPermanent), "lockedUntil": .string(lock.lockedUntil.iso8601),
                ])
            }
        case .securityInsufficient: status = .securityInsufficient
        // A URL the transport policy refuses is the user's to fix; trying again later does not help.
        case .insecureTransport: status = .failure
        default: status = sdk.errorCode.isTransportFailure ? .managerUnreachable : .failure
        }
        message = sdk.message
    default:
        status = .failure
    }
    Terminal.write("xign-setup: \(message)\n")
    return status
}

extension Date {
    var iso8601: String { formatted(.iso8601) }
}

/// Reads a manager URL option; the transport policy is checked where the URL is used.
func parseManagerURL(_ text: String) throws -> ManagerURL {
    do { return try ManagerURL(text) } catch { throw ValidationError("\(error)") }
}

extension ManagerURL {
    /// Invariant 1, checked before any prompt so the user learns it first.
    func checkTransportPolicyAsSdkError() throws {
        do { try checkTransportPolicy() } catch { throw XignSdkError(.insecureTransport, "\(error)") }
    }
}
