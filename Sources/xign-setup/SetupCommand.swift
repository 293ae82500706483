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
            Register.self, Personalize.self, List.self, ChangePin.self, NewActivation.self, AddFactor.self,
            RevokeDevice.self, DeleteAccount.self,
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
        if getuid() == 0, let sudoUser = ProcessInfo.processInfo.environment["SUDO_USER"], !sudoUser.isEmpty {
            return sudoUser
        }
        guard let entry = getpwuid(getuid()), let name = entry.pointee.pw_name else { return "uid\(getuid())" }
        return String(cString: name)
    }
}
