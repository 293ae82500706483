import CPAM
import CXignPAM
import FoundationEssentials
import XignLogin
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// The entry point the C shim calls from pam_sm_authenticate: the caller's items and arguments in, a PAM code out.
@_cdecl("xign_pam_authenticate")
public func xignPAMAuthenticate(_ context: UnsafePointer<xign_pam_context>?) -> Int32 {
    guard let call = ModuleCall(context) else { return PAM_SERVICE_ERR }
    return call.run(ifTheNameIsNotUTF8: PAM_AUTH_ERR) { caller, options, conversation, log in
        var login = Login(caller: caller, options: options, conversation: conversation, log: log)
        // Only sshd's sessions are covered: a sudo's own session ends with its command.
        if caller.service == "sshd" {
            login.onApproval = { xign_pam_pass_approval(context?.pointee.pamh, $0) }
        }
        return login.run().pamCode
    }
}

/// The entry points the C shim calls from sshd's pam_sm_open_session and pam_sm_close_session: an approved SSH login's
/// cover. Never a failure, not even for arguments it cannot read: a session goes on whatever the cover does.
@_cdecl("xign_pam_open_session")
public func xignPAMOpenSession(_ context: UnsafePointer<xign_pam_context>?) -> Int32 {
    let approval = string(context?.pointee.approval)
    return sessionPhase(context) { $0.open(approval: approval) }
}

@_cdecl("xign_pam_close_session")
public func xignPAMCloseSession(_ context: UnsafePointer<xign_pam_context>?) -> Int32 {
    sessionPhase(context) { $0.close() }
}

private func sessionPhase(
    _ context: UnsafePointer<xign_pam_context>?, _ body: (SessionCoverPhase) -> Bool
) -> Int32 {
    guard let call = ModuleCall(context) else { return PAM_IGNORE }
    let code = call.run(ifTheNameIsNotUTF8: PAM_IGNORE) { caller, options, _, log in
        body(SessionCoverPhase(caller: caller, options: options, log: log)) ? PAM_SUCCESS : PAM_IGNORE
    }
    return code == PAM_SUCCESS ? PAM_SUCCESS : PAM_IGNORE
}

/// The entry point the C shim calls from pam_sm_acct_mgmt: whether a user the manager serves here may come in now.
@_cdecl("xign_pam_account")
public func xignPAMAccount(_ context: UnsafePointer<xign_pam_context>?) -> Int32 {
    guard let call = ModuleCall(context) else { return PAM_SERVICE_ERR }
    // No name the manager serves is other than ASCII: such a user is a local one, which is not the module's to judge.
    return call.run(ifTheNameIsNotUTF8: PAM_IGNORE) { caller, options, conversation, log in
        AccountCheck(caller: caller, options: options, conversation: conversation, log: log).run().pamCode
    }
}

/// What both entry points read from the shim's context: the caller, the module's arguments and the log.
private struct ModuleCall {
    let context: xign_pam_context
    /// One line per message in the log, whatever a message quotes.
    let log: (Int32, String) -> Void

    init?(_ context: UnsafePointer<xign_pam_context>?) {
        guard let context = context?.pointee, context.user != nil else { return nil }
        self.context = context
        let pamh = context.pamh
        log = { priority, message in xign_pam_log(pamh, priority, LogText.line(message)) }
    }

    func run(
        ifTheNameIsNotUTF8 refusal: Int32,
        _ body: (LoginCaller, LoginOptions, any Conversation, @escaping (Int32, String) -> Void) -> Int32
    ) -> Int32 {
        var arguments: [String] = []
        if let argv = context.argv {
            for index in 0..<Int(max(0, min(context.argc, 64))) {
                if let argument = string(argv[index]) { arguments.append(argument) }
            }
        }
        var options: LoginOptions
        do { options = try LoginOptions(arguments: arguments) } catch {
            log(LOG_ERR, "configuration error: \(error)")
            return PAM_SERVICE_ERR
        }
        options.silent = context.silent != 0
        // A name that is not UTF-8 would be read with replacement characters and could match another user's enrolment.
        guard
            let user = context.user,
            let userName = String(
                validating: UnsafeBufferPointer(start: user, count: strnlen(user, 1024)).map { UInt8(bitPattern: $0) },
                as: UTF8.self)
        else {
            log(
                LOG_WARNING,
                "\(refusal == PAM_IGNORE ? "account=ignored" : "result=refused"): the PAM user name is not valid UTF-8")
            return refusal
        }
        let caller = LoginCaller(
            user: userName, service: string(context.service), ruser: string(context.ruser),
            rhost: string(context.rhost), tty: string(context.tty),
            inSetuidHost: context.caller_controls_environment != 0)
        let conversation = PAMConversation(pamh: context.pamh)
        let greeter = options.greeterJSONType(service: caller.service).map {
            GreeterConversation(conversation: conversation, type: $0)
        }
        return body(caller, options, greeter ?? conversation, log)
    }
}

extension AccountCheck.Decision {
    var pamCode: Int32 {
        switch self {
        case .notServed, .ignored: PAM_IGNORE
        case .allowed: PAM_SUCCESS
        case .refused(.locked): PAM_ACCT_EXPIRED
        case .refused(.notOnThisHost), .refused(.failed): PAM_PERM_DENIED
        case .refused(.unchecked): PAM_AUTHINFO_UNAVAIL
        case .misconfigured: PAM_SERVICE_ERR
        }
    }
}

private func string(_ pointer: UnsafePointer<CChar>?) -> String? {
    guard let pointer else { return nil }
    let bytes = UnsafeBufferPointer(start: pointer, count: strnlen(pointer, 1024)).map { UInt8(bitPattern: $0) }
    return String(decoding: bytes, as: UTF8.self)
}

extension LoginOutcome {
    /// The one table from outcomes to what libpam's stack understands.
    var pamCode: Int32 {
        switch self {
        case .signedIn, .confirmed, .covered, .signedInOffline: PAM_SUCCESS
        case .wrongOfflinePIN(let left): left == 0 ? PAM_MAXTRIES : PAM_AUTH_ERR
        case .wrongPIN(let lock): lock.isPermanent ? PAM_MAXTRIES : PAM_AUTH_ERR
        case .locked, .attemptLimitReached: PAM_MAXTRIES
        case .unknownUser: PAM_USER_UNKNOWN
        case .ignored: PAM_IGNORE
        case .unavailable: PAM_AUTHINFO_UNAVAIL
        case .refused: PAM_AUTH_ERR
        case .misconfigured: PAM_SERVICE_ERR
        case .conversationFailed: PAM_CONV_ERR
        }
    }
}

/// The PAM application's conversation, through the C shim.
struct PAMConversation: Conversation {
    let pamh: UnsafeMutableRawPointer?

    func ask(_ text: String, echo: Bool) throws -> String {
        var answer: UnsafeMutablePointer<CChar>?
        guard
            xign_pam_converse(pamh, echo ? XIGN_PAM_PROMPT_ECHO_ON : XIGN_PAM_PROMPT_ECHO_OFF, text, &answer)
                == PAM_SUCCESS
        else {
            throw ConversationFailed()
        }
        defer { xign_pam_free_answer(answer) }
        guard let answer else { return "" }
        return string(answer) ?? ""
    }

    func show(_ text: String, isError: Bool) throws {
        guard xign_pam_converse(pamh, isError ? XIGN_PAM_ERROR_MSG : XIGN_PAM_TEXT_INFO, text, nil) == PAM_SUCCESS
        else {
            throw ConversationFailed()
        }
    }
}

/// GNOME's own greeter, where GDM takes JSON (`gdm_json=` under gdm-switchable-auth): plain text as elsewhere, and the
/// `auth-mechanisms` messages.
struct GreeterConversation: AuthSelectionConversation {
    let conversation: PAMConversation
    /// GDM's number for the extension.
    let type: Int32

    func ask(_ text: String, echo: Bool) throws -> String { try conversation.ask(text, echo: echo) }
    func show(_ text: String, isError: Bool) throws { try conversation.show(text, isError: isError) }

    func select(_ request: String) throws -> String {
        var reply: UnsafeMutablePointer<CChar>?
        guard xign_pam_converse_json(conversation.pamh, type, request, &reply) == PAM_SUCCESS, let reply else {
            throw ConversationFailed()
        }
        defer { xign_pam_free_answer(reply) }
        return String(decoding: UnsafeRawBufferPointer(start: reply, count: strlen(reply)), as: UTF8.self)
    }
}
