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

    public init(user: String, service: String?, ruser: String?, rhost: String?, tty: String?, arguments: [String], silent: Bool = false) {
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
    /// An XignSdkErrorCode (or `refused` and `busy`, xignd's own) and a message for the user.
    case failure(code: String, message: String)

    public static let refused = "refused", busy = "busy"

    public init(_ error: any Error) {
        if let error = error as? XignSdkError {
            self = .failure(code: error.errorCode.rawValue, message: error.message)
        } else {
            self = .failure(code: XignSdkErrorCode.stateUnavailable.rawValue, message: "\(error)")
        }
    }
}
