import FoundationEssentials
import XignCore
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// Who logs in, as the application names them (PAM_USER, PAM_SERVICE, PAM_RUSER, PAM_RHOST, PAM_TTY).
public struct LoginCaller: Sendable {
    public var user: String
    public var service: String?
    public var ruser: String?
    public var rhost: String?
    public var tty: String?
    /// A setuid host (su, sudo) that a user started: AT_SECURE, or real and effective ids that differ.
    public var inSetuidHost: Bool
    /// The process whose logind session decides whether the login is at this machine: xignd's caller; nil for the
    /// PAM host itself.
    public var process: Int32?
    /// That process's uid, from the kernel (SO_PEERCRED); nil for the PAM host, whose real uid is the caller's (for
    /// sudo and su the user who ran them, not the target). A session counts only when it is this uid's.
    public var uid: UInt32?

    public init(
        user: String, service: String?, ruser: String?, rhost: String?, tty: String? = nil, inSetuidHost: Bool = false,
        process: Int32? = nil, uid: UInt32? = nil
    ) {
        self.user = user
        self.service = service
        self.ruser = ruser
        self.rhost = rhost
        self.tty = tty
        self.inSetuidHost = inSetuidHost
        self.process = process
        self.uid = uid
    }
}

/// One login as `pam_sm_authenticate` runs it: synchronous, no environment, nothing on stdout or stderr
/// (docs/design.md, "The PAM host"). It picks the way (this machine's key, a confirmation, or xignd), runs it once
/// and maps every error to an outcome that tells the user what to do.
public struct Login {
    public let caller: LoginCaller
    let options: LoginOptions
    let dialogue: LoginDialogue
    let log: (_ priority: Int32, _ message: String) -> Void
    /// Told the approval of a confirmed login, so its session can be covered (the PAM module, under sshd).
    public var onApproval: ((_ confirmationId: String) -> Void)?

    public init(
        caller: LoginCaller, options: LoginOptions, conversation: any Conversation,
        log: @escaping (_ priority: Int32, _ message: String) -> Void
    ) {
        self.caller = caller
        self.options = options
        self.dialogue = LoginDialogue(conversation: conversation, service: caller.service, silent: options.silent)
        self.log = log
    }

    /// Runs the login and logs one line with the outcome, the service, the user, ruser and rhost; never the PIN.
    /// The caller chose every field but the outcome (through xignd, even bytes PAM could not carry, such as NUL).
    public func run() -> LoginOutcome {
        let outcome = dialogue.selection == nil ? authenticate() : authenticateAtGNOMEsGreeter()
        func field(_ value: String?) -> String { value.map { LogText.field($0, maximumLength: 128) } ?? "-" }
        let fields = [
            "result=\(outcome.logWord)", "service=\(field(caller.service))", "user=\(field(caller.user))",
            "ruser=\(field(caller.ruser))", "rhost=\(field(caller.rhost))",
        ]
        log(outcome.isSuccess ? LOG_NOTICE : LOG_WARNING, fields.joined(separator: " "))
        return outcome
    }

    /// GNOME's own greeter takes no plain question once it was sent JSON, so a module after this one in the stack
    /// (pam_unix's password) would leave it waiting: once the greeter was sent JSON, a failure (a wrong PIN, a lock, a
    /// denied or expired approval) is said and the login starts over in the same conversation, after the person asks
    /// for it where the round asked them nothing (a lock refused it at once). It ends on success, when the greeter
    /// resets (its back button, its timeout), or on a failure before the greeter was sent anything: then the greeter
    /// falls back to gdm-password, where the module runs as elsewhere.
    private func authenticateAtGNOMEsGreeter() -> LoginOutcome {
        for _ in 0..<Self.roundsAtGNOMEsGreeter {
            let asked = dialogue.exchanges.count
            let outcome = authenticate()
            if outcome.isSuccess || outcome == .conversationFailed || dialogue.exchanges.count == 0 { return outcome }
            if dialogue.exchanges.count == asked {
                do { _ = try dialogue.select(AuthSelection.pin("XignIn: press Enter to try again")) } catch {
                    return .conversationFailed
                }
            }
        }
        return .refused(.expired)
    }

    /// A bound on rounds each of which waits for the person: never reached by a person, only by a loop gone wrong.
    static let roundsAtGNOMEsGreeter = 100

    func debug(_ message: String) {
        if options.debug { log(LOG_DEBUG, message) }
    }

    private func authenticate() -> LoginOutcome {
        // Without root the state and the TPM are out of reach (screen lockers): xignd does the login.
        if geteuid() != 0 { return DaemonLogin(login: self).run() }
        let configuration: ClientConfiguration
        do { configuration = try options.clientConfiguration() } catch {
            log(LOG_ERR, "configuration error: \(error)")
            if let error = error as? XignSdkError, error.errorCode == .untrustedFile {
                tell("XignIn: \(error.message). Ask your administrator.", isError: true)
            }
            return .misconfigured(.configuration)
        }
        let sdk: XignSdk
        let enrolment: IdentityManagerEntity?
        do {
            sdk = try XignSdk(configuration: configuration, localUser: caller.user)
            enrolment = try sdk.store.list().first(where: { UserName.same($0.localUser, caller.user) })
        } catch {
            log(LOG_ERR, "cannot use the xign state: \(error)")
            return .misconfigured(.state)
        }
        let remote =
            options.remote == .pinOnly
            ? nil : LoginOrigin(caller: caller, records: configuration.sessionRecords).remoteReason
        let confirming = options.mode == .confirm || (options.mode == .auto && (enrolment == nil || remote != nil))
        do {
            if !confirming {
                guard let enrolment else {
                    debug("no enrolment for \(caller.user) in \(configuration.stateDirectory)")
                    return unknownUser()
                }
                if let remote { return refuseRemote(because: remote) }
                return try withSetuidAllowance(configuration) {
                    let role = options.role ?? configuration.role(forPAMService: caller.service)
                    debug("enrolment \(enrolment.idmIdentifier) at \(enrolment.managerURL), role \(role)")
                    return try LocalLogin(
                        login: self, sdk: sdk, enrolment: enrolment, service: configuration.pamService, role: role
                    ).run()
                }
            }
            guard !dialogue.showsNoText else {
                log(
                    LOG_ERR,
                    "mode=confirm at \(caller.service ?? "a service") shows no text from PAM, so nobody could read the code; use mode=local there"
                )
                tell(
                    "XignIn: this login screen cannot show an approval code; log in with your PIN where you are enrolled.",
                    isError: true)
                return .misconfigured(.confirmWithoutText)
            }
            if let account = LocalUser(named: caller.user), account.isSystemAccount,
                !configuration.confirmsSystemAccounts
            {
                log(
                    LOG_WARNING,
                    "refused to confirm a login to the system account \(caller.user) (uid \(account.uid)); confirm_system_accounts allows it"
                )
                tell("XignIn: logins to \(caller.user) are not confirmed on this host.", isError: true)
                return .refused(.systemAccount)
            }
            if let covered = try CoverLogin(login: self, sdk: sdk, stateDirectory: configuration.stateDirectory).run() {
                return covered
            }
            return try ConfirmLogin(login: self, sdk: sdk).run()
        } catch {
            return outcome(of: error)
        }
    }

    /// The outcome of a login that threw, with what the user and the log are told.
    func outcome(of error: any Error) -> LoginOutcome {
        switch error {
        case is ConversationFailed:
            return .conversationFailed
        case let error as XignSdkError:
            return outcome(of: error)
        default:
            log(LOG_ERR, "login failed: \(error)")
            return .refused(.other)
        }
    }

    private func outcome(of error: XignSdkError) -> LoginOutcome {
        if let lock = error.lockout {
            tellLocked(lock)
            return .locked(lock)
        }
        if error.errorCode.leavesTheManagerUnavailable {
            log(LOG_ERR, "manager \(error.errorCode == .managerBusy ? "busy" : "unreachable"): \(error.message)")
            if options.failMode == .safe { return .ignored(.managerUnreachable) }
            // A certificate the machine cannot trust is for the administrator to fix, so say which check failed.
            switch error.errorCode {
            case .tlsFailure:
                tell(
                    "XignIn: the identity manager's certificate is not trusted (\(error.message)). Ask your administrator.",
                    isError: true)
            case .managerBusy: tell("XignIn: the identity manager is busy; try again in a moment.", isError: true)
            default: tell("XignIn: the identity manager cannot be reached.", isError: true)
            }
            return .unavailable(.manager)
        }
        switch error.errorCode {
        case .securityInsufficient:
            tell("XignIn refuses this device: \(error.message)", isError: true)
            return .refused(.securityInsufficient)
        case .tpmUnavailable:
            log(LOG_ERR, "TPM unavailable: \(error.message)")
            tell("XignIn: \(error.message)", isError: true)
            return .unavailable(.tpm)
        case .deviceKeyFailure:
            log(LOG_ERR, "device key: \(error.message)")
            tell("XignIn: \(error.message)", isError: true)
            return .refused(.deviceKey)
        case .biometricMismatch, .biometricUnavailable:
            tell("XignIn: \(error.message)", isError: true)
            return .refused(error.errorCode == .biometricMismatch ? .biometricMismatch : .biometricUnavailable)
        case .biometricInvalidated:
            log(LOG_WARNING, "biometric factor removed: the enrolled fingers of \(caller.user) changed")
            tell(
                "XignIn: the fingers enrolled here changed, so your fingerprint no longer counts. "
                    + "Log in with your PIN, then run xign-setup add-factor biometric.", isError: true)
            return .refused(.biometricInvalidated)
        case .deviceNotEnrolled:
            tell(
                "XignIn: this machine's enrolment was removed at the manager; run xign-setup personalize again.",
                isError: true)
            return .refused(.notEnrolled)
        case .unknownLoginName:
            debug("the manager knows no account with the login name \(caller.user)")
            return unknownUser()
        case .tooManyRequests:
            tell("XignIn: \(error.message)", isError: true)
            return .refused(.tooManyRequests)
        case .localUserMismatch:
            log(LOG_WARNING, "confirmation refused: \(error.message)")
            tell(
                "XignIn: your account at the identity manager is not this server's user \(caller.user); ask your administrator.",
                isError: true)
            return .refused(.localUserMismatch)
        case .hostNotAllowed:
            tell("XignIn: your account may not log in to this server.", isError: true)
            return .refused(.hostNotAllowed)
        case .accountLocked:
            tell("XignIn: an administrator locked your account; ask them to unlock it.", isError: true)
            return .refused(.accountLocked)
        case .stateUnavailable:
            log(LOG_ERR, "xign state: \(error.message)")
            tell("XignIn: \(error.message). Ask your administrator.", isError: true)
            return .misconfigured(.state)
        case .hostNotJoined:
            log(LOG_ERR, "mode=confirm needs this machine to be a host: \(error.message)")
            return .misconfigured(.notAHost)
        default:
            log(LOG_ERR, "login refused: \(error.message)")
            return .refused(.other)
        }
    }

    func unknownUser() -> LoginOutcome {
        options.ignoreUnknownUser ? .ignored(.unknownUser) : .unknownUser
    }

    /// A lock in force: this attempt's PIN was not checked, so the message does not blame one.
    func tellLocked(_ lock: LockoutAttemptInformation) {
        if lock.isPermanent {
            tell(
                "XignIn is locked permanently after too many wrong PINs. Ask your administrator to unlock it, or register again with xign-setup register.",
                isError: true)
        } else {
            tell(
                "XignIn is locked until \(lock.lockedUntil.localDescription); try again after that time.", isError: true
            )
        }
    }

    func ask(_ text: String, echo: Bool) throws -> String { try dialogue.ask(text, echo: echo) }
    func show(_ text: String, isError: Bool) throws { try dialogue.show(text, isError: isError) }
    func tell(_ text: String, isError: Bool) { dialogue.tell(text, isError: isError) }
}
