import FoundationEssentials
import XignCore

// What pam_xign and xign-setup (callers without root) and xignd say to each other over /run/xign/xignd.sock.
// One request opens a connection. A login is a conversation: xignd sends prompts and messages, the caller
// answers the prompts, and the result ends it. Every other request gets one reply.

/// A login a caller without root asks xignd to run; the caller's fields are only as true as the caller.
public struct DaemonLoginRequest: Codable, Sendable, Equatable {
    public var user: String
    public var service: String?
    public var ruser: String?
    public var rhost: String?
    public var tty: String?
    /// The module arguments of the caller's pam_xign line; xignd ignores `config=` and the mode.
    public var arguments: [String]
    /// The caller's PAM_SILENT.
    public var silent: Bool

    public init(
        user: String, service: String?, ruser: String?, rhost: String?, tty: String?, arguments: [String],
        silent: Bool = false
    ) {
        self.user = user
        self.service = service
        self.ruser = ruser
        self.rhost = rhost
        self.tty = tty
        self.arguments = arguments
        self.silent = silent
    }
}

/// What a caller may ask xignd; each names the local user it acts for, which xignd checks against SO_PEERCRED.
public enum DaemonRequest: Codable, Sendable, Equatable {
    case login(DaemonLoginRequest)
    /// The answer to the last prompt.
    case answer(text: String)
    case pendingConfirmations(user: String, waitMilliseconds: Int)
    case approve(user: String, confirmation: PendingConfirmation, code: String, pin: String)
    case deny(user: String, confirmation: PendingConfirmation)

    /// The local user the request acts for.
    public var user: String? {
        switch self {
        case .login(let login): login.user
        case .pendingConfirmations(let user, _), .approve(let user, _, _, _), .deny(let user, _): user
        case .answer: nil
        }
    }
}

/// xignd's side of a conversation: prompts and messages to relay, then one end.
public enum DaemonReply: Codable, Sendable, Equatable {
    case prompt(text: String, echo: Bool)
    case message(text: String, isError: Bool)
    /// The end of a login.
    case loginEnded(outcome: LoginOutcome)
    case pendingConfirmations([PendingConfirmation])
    case approved(loginName: String, relyingPartyName: String)
    case lockout(LockoutAttemptInformation)
    case denied
    case failure(DaemonFailure)

    public init(_ error: any Error) {
        let error = error as? XignSdkError ?? XignSdkError(.stateUnavailable, "\(error)")
        self = .failure(.sdk(code: error.errorCode, message: error.message))
    }
}

/// Why xignd ended a request without its answer; each case has a message for the user.
public enum DaemonFailure: Codable, Sendable, Equatable {
    /// xignd refuses the request itself: no such user, another user's enrolment, an answer without a prompt.
    case refused(message: String)
    /// xignd has too many connections open; trying again may work.
    case busy(message: String)
    /// Too many PIN attempts for the user on this machine (xignd's own allowance, not the manager's lock).
    case attemptLimitReached(message: String)
    /// The SDK's error while xignd ran the request.
    case sdk(code: XignSdkErrorCode, message: String)

    public var message: String {
        switch self {
        case .refused(let message), .busy(let message), .attemptLimitReached(let message), .sdk(_, let message): message
        }
    }

    /// The error a caller raises for it.
    public var error: XignSdkError {
        switch self {
        case .refused, .busy: XignSdkError(.stateUnavailable, message)
        case .attemptLimitReached: XignSdkError(.lockedOut, message)
        case .sdk(let code, _): XignSdkError(code, message)
        }
    }
}
