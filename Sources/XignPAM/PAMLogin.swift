import CPAM
import CXignPAM
import FoundationEssentials
import XignCore
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// Talks to the user. Under PAM this is the application's conversation function.
public protocol Conversation {
    /// Asks and returns the answer; throws when the conversation fails (PAM_CONV_ERR).
    func ask(_ text: String, echo: Bool) throws -> String
    /// Shows text; an error is shown as such.
    func show(_ text: String, isError: Bool) throws
}

public struct ConversationFailed: Error {
    public init() {}
}

/// One login, as `pam_sm_authenticate` runs it: synchronous, no environment, nothing on stdout or stderr.
public struct PAMLogin {
    public struct Caller {
        var user: String
        var service: String?
        var ruser: String?
        var rhost: String?
        var tty: String? = nil
        /// A setuid host (su, sudo) that a user started: the shim's test (AT_SECURE, or real and effective ids differ).
        var inSetuidHost = false

        public init(user: String, service: String?, ruser: String?, rhost: String?, tty: String? = nil, inSetuidHost: Bool = false) {
            self.user = user
            self.service = service
            self.ruser = ruser
            self.rhost = rhost
            self.tty = tty
            self.inSetuidHost = inSetuidHost
        }
    }

    let caller: Caller
    let options: PAMOptions
    let conversation: any Conversation
    let log: (_ priority: Int32, _ message: String) -> Void

    public init(caller: Caller, options: PAMOptions, conversation: any Conversation, log: @escaping (_ priority: Int32, _ message: String) -> Void) {
        self.caller = caller
        self.options = options
        self.conversation = conversation
        self.log = log
    }

    /// Runs the login and logs one line with the result, the service, the user, ruser and rhost. Never the PIN.
    /// The caller chose every field but the result (through xignd, bytes PAM could not carry, such as NUL).
    public func run() -> Int32 {
        let (code, outcome) = authenticate()
        func field(_ value: String?) -> String { value.map { LogText.field($0, maximumLength: 128) } ?? "-" }
        let fields = [
            "result=\(outcome)", "service=\(field(caller.service))", "user=\(field(caller.user))",
            "ruser=\(field(caller.ruser))", "rhost=\(field(caller.rhost))",
        ]
        log(code == PAM_SUCCESS ? LOG_NOTICE : LOG_WARNING, fields.joined(separator: " "))
        return code
    }

    func debug(_ message: String) {
        if options.debug { log(LOG_DEBUG, message) }
    }

    /// The PAM code and a word for the log.
    private func authenticate() -> (Int32, String) {
        // Without root the state and the TPM are out of reach (screen lockers): xignd does the login.
        if geteuid() != 0 { return loginThroughDaemon() }
        var configuration: ClientConfiguration
        do { configuration = try ClientConfiguration.load(path: options.configPath) } catch {
            log(LOG_ERR, "configuration error: \(error)")
            return (PAM_SERVICE_ERR, "config-error")
        }
        if let seconds = options.timeoutSeconds {
            configuration.http.timeoutMilliseconds = seconds * 1000
            configuration.http.connectTimeoutMilliseconds = min(configuration.http.connectTimeoutMilliseconds, seconds * 1000)
        }
        let sdk: XignSdk
        let enrolment: IdentityManagerEntity?
        do {
            sdk = try XignSdk(configuration: configuration, localUser: caller.user)
            enrolment = try sdk.store.list().first(where: { UserName.same($0.localUser, caller.user) })
        } catch {
            log(LOG_ERR, "cannot use the xign state: \(error)")
            return (PAM_SERVICE_ERR, "state-error")
        }
        let remote = options.remote == .pinOnly ? nil : LoginOrigin(caller: caller, records: configuration.sessionRecords).remoteReason
        let confirming = options.mode == .confirm || (options.mode == .auto && (enrolment == nil || remote != nil))
        if !confirming && enrolment == nil {
            debug("no enrolment for \(caller.user) in \(configuration.stateDirectory)")
            return unknownUser()
        }
        if !confirming, let remote { return refuseRemote(because: remote) }
        var setuidAttempts: (limit: AttemptLimit, key: String)?
        if !confirming {
            switch checkSetuidCaller(configuration) {
            case .refused(let refusal): return refusal
            case .limited(let limit, let key): setuidAttempts = (limit, key)
            case .free: break
            }
        }
        do {
            if let enrolment, !confirming {
                let role = options.role ?? configuration.role(forPAMService: caller.service)
                debug("enrolment \(enrolment.idmIdentifier) at \(enrolment.managerURL), role \(role)")
                let result = try login(sdk: sdk, enrolment: enrolment, service: configuration.pamService, role: role)
                if result.0 == PAM_SUCCESS, let setuidAttempts { try? setuidAttempts.limit.reset(setuidAttempts.key) }
                return result
            }
            if let account = LocalUser(named: caller.user), account.isSystemAccount, !configuration.confirmsSystemAccounts {
                log(
                    LOG_WARNING,
                    "refused to confirm a login to the system account \(caller.user) (uid \(account.uid)); confirm_system_accounts allows it")
                tell("XignIn: logins to \(caller.user) are not confirmed on this host.", isError: true)
                return (PAM_AUTH_ERR, "system-account")
            }
            return try confirm(sdk: sdk)
        } catch is ConversationFailed {
            return (PAM_CONV_ERR, "conversation-error")
        } catch let lockout as XignSdkLockoutError {
            return lockedOut(permanent: lockout.information.isPermanent, until: lockout.information.lockedUntil)
        } catch let error as XignSdkSecurityInsufficientError {
            tell("XignIn refuses this device: \(error.message)", isError: true)
            return (PAM_AUTH_ERR, "security-insufficient")
        } catch let error as XignSdkError {
            switch error.errorCode {
            case .managerUnreachable, .timeout, .tlsFailure, .insecureTransport:
                log(LOG_ERR, "manager unreachable: \(error.message)")
                if options.failMode == .safe { return (PAM_IGNORE, "unreachable-ignored") }
                // A certificate the machine cannot trust is for the administrator to fix, so say which check failed.
                tell(
                    error.errorCode == .tlsFailure
                        ? "XignIn: the identity manager's certificate is not trusted (\(error.message)). Ask your administrator."
                        : "XignIn: the identity manager cannot be reached.", isError: true)
                return (PAM_AUTHINFO_UNAVAIL, "unreachable")
            case .tpmUnavailable:
                log(LOG_ERR, "TPM unavailable: \(error.message)")
                tell("XignIn: \(error.message)", isError: true)
                return (PAM_AUTHINFO_UNAVAIL, "tpm-unavailable")
            case .deviceKeyFailure:
                log(LOG_ERR, "device key: \(error.message)")
                tell("XignIn: \(error.message)", isError: true)
                return (PAM_AUTH_ERR, "device-key")
            case .biometricMismatch, .biometricUnavailable:
                tell("XignIn: \(error.message)", isError: true)
                return (PAM_AUTH_ERR, error.errorCode == .biometricMismatch ? "biometric-mismatch" : "biometric-unavailable")
            case .deviceNotEnrolled:
                tell("XignIn: this machine's enrolment was removed at the manager; run xign-setup personalize again.", isError: true)
                return (PAM_AUTH_ERR, "not-enrolled")
            case .unknownLoginName:
                debug("the manager knows no account with the login name \(caller.user)")
                return unknownUser()
            case .tooManyRequests:
                tell("XignIn: \(error.message)", isError: true)
                return (PAM_AUTH_ERR, "too-many-requests")
            case .hostNotAllowed:
                tell("XignIn: your account may not log in to this server.", isError: true)
                return (PAM_AUTH_ERR, "host-not-allowed")
            case .hostNotJoined:
                log(LOG_ERR, "mode=confirm needs this machine to be a host: \(error.message)")
                return (PAM_SERVICE_ERR, "not-a-host")
            default:
                log(LOG_ERR, "login refused: \(error.message)")
                return (PAM_AUTH_ERR, "refused")
            }
        } catch {
            log(LOG_ERR, "login failed: \(error)")
            return (PAM_AUTH_ERR, "error")
        }
    }

    private func login(sdk: XignSdk, enrolment: IdentityManagerEntity, service: String, role roleName: String) throws -> (Int32, String) {
        let authenticator = sdk.authenticator
        let data = try authenticator.fetchInAppAuthenticationInitializationData(
            idmIdentifier: enrolment.idmIdentifier, service: service, host: Self.hostName(), localUser: caller.user
        )
        let request = try authenticator.startAuthenticationSynchronous(data: data)
        guard let role = request.roles.first(where: { $0.name == roleName }) else {
            log(LOG_ERR, "the manager's service \(service) has no role \(roleName) (it offers \(request.roles.map(\.name).joined(separator: ", ")))")
            return (PAM_SERVICE_ERR, "no-role")
        }
        request.setSelection(role)
        for info in request.info.attributes where info.isDataMissing && info.isRequired {
            let answer = try ask("\(request.relyingPartyName) needs your \(info.name): ", echo: true)
            guard info.setValue(value: answer) == .valid else {
                tell("That \(info.name) is not valid.", isError: true)
                return (PAM_AUTH_ERR, "attribute-invalid")
            }
        }
        guard case .success(let information) = try authenticator.prepareAuthenticationUserInformationSynchronous(request: request) else {
            tell("XignIn: the requested information is incomplete.", isError: true)
            return (PAM_AUTH_ERR, "attribute-missing")
        }
        guard let factors = information.requestedAuthenticators.first(where: { Set($0).isSubset(of: enrolment.factors) }) else {
            let wanted = information.requestedAuthenticators.map { $0.map(\.rawValue).joined(separator: "+") }.joined(separator: " or ")
            tell("XignIn: role \(roleName) needs \(wanted), which this machine has not enrolled.", isError: true)
            return (PAM_AUTH_ERR, "factor-missing")
        }
        for factor in factors {
            switch factor {
            case .pin:
                let pin = try ask(options.prompt.replacing("%a", with: DisplayText.sanitized(enrolment.alias, keepingLineFeeds: false)), echo: false)
                guard !pin.isEmpty else { return (PAM_AUTH_ERR, "no-pin") }
                try information.sign(factor: PinFactor(pin))
            case .biometric:
                try information.sign(factor: BiometricFactor { tell("XignIn: \($0)", isError: false) })
            default:
                try information.sign(factor: DeviceFactor())
            }
        }
        switch try authenticator.finishAuthenticationSynchronous(userInfo: information) {
        case .lockout(let lock, _):
            if lock.isPermanent { return lockedOut(permanent: true, until: lock.lockedUntil) }
            tell("Wrong PIN. XignIn is locked until \(lock.lockedUntil.localDescription); try again after that time.", isError: true)
            return (PAM_AUTH_ERR, "wrong-pin")
        case .apiAccessMergeComplete, .userLogin, .apiAccessChangePin, .apiAccessRequestNewActivationData, .apiAccessDelete,
            .apiAccessAddFactor:
            log(LOG_ERR, "the manager answered a login with the result of another process")
            return (PAM_AUTH_ERR, "refused")
        case .serviceLogin(let login):
            let token = try authenticator.fetchToken(try authenticator.fetchAuthorizationCode(login), expecting: data)
            debug("token for \(token.subject), role \(token.role), host \(token.host), valid until \(token.expiresAt.localDescription)")
            if abs(token.managerClockOffsetMilliseconds) > Self.clockWarningMilliseconds {
                // Logins do not depend on it (lifetimes are measured here), but TLS and logs do.
                log(
                    LOG_WARNING,
                    "this host's clock differs from the manager's by \(token.managerClockOffsetMilliseconds / 1000) s (manager minus host); check NTP"
                )
            }
            return (PAM_SUCCESS, "success")
        }
    }

    func unknownUser() -> (Int32, String) {
        options.ignoreUnknownUser ? (PAM_IGNORE, "unknown-user-ignored") : (PAM_USER_UNKNOWN, "unknown-user")
    }

    private func lockedOut(permanent: Bool, until: Date) -> (Int32, String) {
        if permanent {
            tell(
                "XignIn is locked permanently after too many wrong PINs. Ask your administrator to unlock it, or register again with xign-setup register.",
                isError: true)
            return (PAM_MAXTRIES, "locked-permanently")
        }
        // This attempt's PIN was not checked (a lock was already in force), so the message does not blame one.
        tell("XignIn is locked until \(until.localDescription); try again after that time.", isError: true)
        return (PAM_MAXTRIES, "locked")
    }

    /// Every text the conversation gets quotes the manager somewhere (aliases, names, messages), so none carries
    /// control characters or escape sequences to the user's terminal (DisplayText).
    func ask(_ text: String, echo: Bool) throws -> String {
        do { return try conversation.ask(DisplayText.sanitized(text), echo: echo) } catch { throw ConversationFailed() }
    }

    func show(_ text: String, isError: Bool) throws {
        do { try conversation.show(DisplayText.sanitized(text), isError: isError) } catch { throw ConversationFailed() }
    }

    /// OpenSSH shows PAM_TEXT_INFO only after the next prompt (bug 2876), so under sshd text that must be seen
    /// now goes into a prompt.
    var showsTextOnlyWithPrompts: Bool { caller.service == "sshd" }

    /// Text the user must see now.
    func tell(_ text: String, isError: Bool) {
        if showsTextOnlyWithPrompts {
            _ = try? ask(text + " Press Enter.", echo: true)
        } else {
            try? show(text, isError: isError)
        }
    }

    static let clockWarningMilliseconds: Int64 = 300_000

    static func hostName() -> String {
        var name = [CChar](repeating: 0, count: 256)
        guard gethostname(&name, name.count - 1) == 0 else { return "localhost" }
        return String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// The PAM application's conversation, through the C shim.
struct PAMConversation: Conversation {
    let pamh: UnsafeMutableRawPointer?

    func ask(_ text: String, echo: Bool) throws -> String {
        var answer: UnsafeMutablePointer<CChar>?
        guard xign_pam_converse(pamh, echo ? XIGN_PAM_PROMPT_ECHO_ON : XIGN_PAM_PROMPT_ECHO_OFF, text, &answer) == PAM_SUCCESS else {
            throw ConversationFailed()
        }
        defer { xign_pam_free_answer(answer) }
        guard let answer else { return "" }
        let bytes = UnsafeBufferPointer(start: answer, count: strnlen(answer, 1024)).map { UInt8(bitPattern: $0) }
        return String(decoding: bytes, as: UTF8.self)
    }

    func show(_ text: String, isError: Bool) throws {
        guard xign_pam_converse(pamh, isError ? XIGN_PAM_ERROR_MSG : XIGN_PAM_TEXT_INFO, text, nil) == PAM_SUCCESS else {
            throw ConversationFailed()
        }
    }
}

/// The entry point the C shim calls from pam_sm_authenticate.
@_cdecl("xign_pam_authenticate")
public func xignPAMAuthenticate(_ context: UnsafePointer<xign_pam_context>?) -> Int32 {
    guard let context = context?.pointee, let user = context.user else { return PAM_SERVICE_ERR }
    let pamh = context.pamh
    func string(_ pointer: UnsafePointer<CChar>?) -> String? {
        guard let pointer else { return nil }
        let bytes = UnsafeBufferPointer(start: pointer, count: strnlen(pointer, 1024)).map { UInt8(bitPattern: $0) }
        return String(decoding: bytes, as: UTF8.self)
    }
    // One line per message in the log, whatever a message quotes.
    let log: (Int32, String) -> Void = { priority, message in xign_pam_log(pamh, priority, LogText.line(message)) }
    var arguments: [String] = []
    if let argv = context.argv {
        for index in 0..<Int(max(0, min(context.argc, 64))) { if let argument = string(argv[index]) { arguments.append(argument) } }
    }
    let options: PAMOptions
    do { options = try PAMOptions(arguments: arguments) } catch {
        log(LOG_ERR, "configuration error: \(error)")
        return PAM_SERVICE_ERR
    }
    // A name that is not UTF-8 would be read with replacement characters and could match another user's enrolment.
    guard let userName = String(validating: UnsafeBufferPointer(start: user, count: strnlen(user, 1024)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    else {
        log(LOG_WARNING, "result=refused: the PAM user name is not valid UTF-8")
        return PAM_AUTH_ERR
    }
    let caller = PAMLogin.Caller(
        user: userName, service: string(context.service), ruser: string(context.ruser), rhost: string(context.rhost),
        tty: string(context.tty), inSetuidHost: context.caller_controls_environment != 0)
    return PAMLogin(caller: caller, options: options, conversation: PAMConversation(pamh: pamh), log: log).run()
}
