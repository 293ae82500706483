import CPAM
import FoundationEssentials
import XignCore
import XignDaemon

#if canImport(Glibc)
import Glibc
#endif

extension PAMLogin {
    /// What xignd may take between two messages: its own calls to the manager and the TPM.
    static let daemonReplyMilliseconds = 60_000
    /// The codes xignd may end a login with; anything else is treated as a refusal.
    static let daemonResults: Set<Int32> = [
        PAM_SUCCESS, PAM_AUTH_ERR, PAM_AUTHINFO_UNAVAIL, PAM_USER_UNKNOWN, PAM_MAXTRIES, PAM_IGNORE, PAM_SERVICE_ERR, PAM_CONV_ERR,
    ]

    /// The login for a host that runs without root (a screen locker as the user): xignd holds the state and the
    /// TPM, does the login for the caller's own uid, and relays its prompts through this conversation.
    func loginThroughDaemon() -> (Int32, String) {
        guard options.mode != .confirm else {
            log(LOG_ERR, "mode=confirm needs root (it signs with this host's key); a host without root uses mode=local through xignd")
            return (PAM_SERVICE_ERR, "confirm-without-root")
        }
        let request = DaemonLoginRequest(
            user: caller.user, service: caller.service, ruser: caller.ruser, rhost: caller.rhost, tty: caller.tty,
            arguments: options.arguments)
        do {
            let connection = try DaemonConnection.connect(path: options.daemonSocket, timeoutMilliseconds: 5_000)
            guard connection.peerCredentials()?.uid == 0 else {
                log(LOG_ERR, "the process at \(options.daemonSocket) is not root's; it is not xignd")
                return (PAM_AUTHINFO_UNAVAIL, "xignd-impostor")
            }
            try connection.send(DaemonRequest.login(request), deadline: .deadline(in: 5_000))
            while true {
                switch try connection.receive(DaemonReply.self, deadline: .deadline(in: Self.daemonReplyMilliseconds)) {
                case .prompt(let text, let echo):
                    let answer = try ask(text, echo: echo)
                    try connection.send(DaemonRequest.answer(text: answer), deadline: .deadline(in: 5_000))
                case .message(let text, let isError):
                    tell(text, isError: isError)
                case .loginResult(let code):
                    return Self.daemonResults.contains(code) ? (code, "xignd") : (PAM_AUTH_ERR, "xignd-unknown-result")
                case .failure(DaemonReply.busy, let message):
                    log(LOG_ERR, "xignd is busy: \(message)")
                    return daemonUnavailable()
                case .failure(_, let message):
                    tell("XignIn: \(message)", isError: true)
                    return (PAM_AUTH_ERR, "xignd-refused")
                default:
                    log(LOG_ERR, "xignd answered a login with a reply that does not belong to it")
                    return (PAM_SERVICE_ERR, "xignd-error")
                }
            }
        } catch is ConversationFailed {
            return (PAM_CONV_ERR, "conversation-error")
        } catch {
            log(LOG_ERR, "\(error) (socket \(options.daemonSocket))")
            return daemonUnavailable()
        }
    }

    private func daemonUnavailable() -> (Int32, String) {
        if options.failMode == .safe { return (PAM_IGNORE, "xignd-unavailable-ignored") }
        tell("XignIn cannot check your PIN: the xignd service does not answer. Ask your administrator to start xignd.socket.", isError: true)
        return (PAM_AUTHINFO_UNAVAIL, "xignd-unavailable")
    }
}
