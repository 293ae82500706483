import FoundationEssentials
import XignCore

/// How a login runs, from the arguments of a `pam_xign.so` line. Unknown or malformed arguments are configuration
/// errors: a typo must not quietly weaken a login.
public struct LoginOptions: Equatable {
    enum FailMode: String, Equatable {
        /// Manager unreachable: the login is unavailable, so a `required` line fails it.
        case secure
        /// Manager unreachable: ignored, so the rest of the stack decides (for example a password).
        case safe
    }

    /// `mode=`: which way a login goes.
    public enum Mode: String, Equatable {
        /// This machine holds the user's enrolment: device key and PIN.
        case local
        /// The user approves on an enrolled device; this machine is a host (`xign-setup host join`).
        case confirm
        /// local where this machine holds an enrolment of the user, else confirm.
        case auto
    }

    /// What the local device key does for a login that comes over the network (LoginOrigin).
    enum RemotePolicy: String, Equatable {
        /// Refused with one line: the key is present whoever connects, so it proves nothing there.
        case refuse
        /// Ignored: the rest of the stack decides, as in the pam-auth-update profile's common-auth.
        case ignore
        /// Device key and PIN anyway, so the PIN is the only secret left; an administrator's explicit choice.
        case pinOnly = "pin-only"
    }

    enum QRPolicy: String, Equatable {
        /// Only where it fits an 80×24 terminal with the text around it.
        case auto
        case always
        case never
        /// No QR code, and one short line: the account page and the code. For greeters that show text in a proportional
        /// font, where a QR code of text cannot be read.
        case text
    }

    public var mode = Mode.local
    var remote = RemotePolicy.refuse
    var qr = QRPolicy.auto
    /// The longest a confirmation waits, below sshd's LoginGraceTime (120 s).
    var totalTimeoutSeconds = 100
    public var configPath = ClientConfiguration.defaultPath
    /// xignd's socket, for hosts that run the login without root (screen lockers).
    var daemonSocket = DaemonConnection.defaultSocketPath
    var role: String?
    var timeoutSeconds: Int?
    var debug = false
    /// The PIN prompt; `%a` is replaced by the activation's alias.
    var prompt = "XignIn PIN for %a: "
    var failMode = FailMode.secure
    var ignoreUnknownUser = false
    /// `gdm_json=`: GDM's number for its CustomJSON extension (its index in the list GDM gives only in the process
    /// environment, which the module does not read), set in the `gdm-switchable-auth` file that GNOME 51's greeter runs.
    var gdmJSONType: Int32?

    struct Invalid: Error, Equatable, CustomStringConvertible {
        let description: String
    }

    /// As given, for xignd.
    var arguments: [String] = []
    /// PAM_SILENT: the application asks for no messages. Prompts, and the text the user must act on (a
    /// confirmation's code, the fingerprint cue), are still shown; why a login failed goes to the log only, as
    /// pam_faillock does.
    public var silent = false

    public init(arguments: [String]) throws {
        self.arguments = arguments
        for argument in arguments {
            guard argument.utf8.count <= 512 else {
                throw Invalid(description: "module argument longer than 512 bytes")
            }
            let parts = argument.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0])
            let value = parts.count == 2 ? String(parts[1]) : nil
            switch (name, value) {
            case ("config", let path?) where path.hasPrefix("/"):
                configPath = path
            case ("socket", let path?) where path.hasPrefix("/") && path.utf8.count < 108:
                daemonSocket = path
            case ("role", let role?) where !role.isEmpty && role.utf8.count <= 64:
                self.role = role
            case ("timeout", let seconds?):
                guard let number = Int(seconds), (1...120).contains(number) else {
                    throw Invalid(description: "timeout=\(seconds.prefix(20)) must be 1 to 120 seconds")
                }
                timeoutSeconds = number
            case ("debug", nil):
                debug = true
            case ("prompt", let text?) where !text.isEmpty && text.utf8.count <= 128:
                prompt = text
            case ("failmode", let mode?):
                guard let parsed = FailMode(rawValue: mode) else {
                    throw Invalid(description: "failmode=\(mode.prefix(20)) must be secure or safe")
                }
                failMode = parsed
            case ("gdm_json", let number?):
                guard let type = Int32(number), (0...15).contains(type) else {
                    throw Invalid(
                        description: "gdm_json=\(number.prefix(20)) must be GDM's number for CustomJSON, 0 to 15")
                }
                gdmJSONType = type
            case ("ignore_unknown_user", nil):
                ignoreUnknownUser = true
            case ("mode", let value?):
                guard let parsed = Mode(rawValue: value) else {
                    throw Invalid(description: "mode=\(value.prefix(20)) must be local, confirm or auto")
                }
                mode = parsed
            case ("remote", let value?):
                guard let parsed = RemotePolicy(rawValue: value) else {
                    throw Invalid(description: "remote=\(value.prefix(20)) must be refuse, ignore or pin-only")
                }
                remote = parsed
            case ("qr", let value?):
                guard let parsed = QRPolicy(rawValue: value) else {
                    throw Invalid(description: "qr=\(value.prefix(20)) must be auto, always, never or text")
                }
                qr = parsed
            case ("timeout_total", let seconds?):
                guard let number = Int(seconds), (10...600).contains(number) else {
                    throw Invalid(description: "timeout_total=\(seconds.prefix(20)) must be 10 to 600 seconds")
                }
                totalTimeoutSeconds = number
            default:
                throw Invalid(
                    description: "unknown or malformed module argument '\(argument.prefix(64))' (see pam_xign(8))")
            }
        }
    }

    public init() {}
}

extension LoginOptions {
    /// GNOME's own greeter takes JSON only under its service: the same line in gdm-password (GDM 43 to 49, whose list
    /// has no CustomJSON) speaks plainly.
    public func greeterJSONType(service: String?) -> Int32? {
        service == "gdm-switchable-auth" ? gdmJSONType : nil
    }

    /// The machine's configuration (`config=`), with `timeout=` over its HTTP timeouts.
    func clientConfiguration() throws -> ClientConfiguration {
        var configuration = try ClientConfiguration.load(path: configPath)
        if let seconds = timeoutSeconds {
            configuration.http.timeoutMilliseconds = seconds * 1000
            configuration.http.connectTimeoutMilliseconds = min(
                configuration.http.connectTimeoutMilliseconds, seconds * 1000)
        }
        return configuration
    }
}
