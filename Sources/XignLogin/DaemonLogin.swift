import FoundationEssentials
import XignCore

#if canImport(Glibc)
import Glibc
#endif

/// The login for a host that runs without root (a screen locker as the user): xignd holds the state and the TPM,
/// runs the login for the caller's own uid, and relays its prompts through this conversation.
struct DaemonLogin {
    /// What xignd may take between two messages: its own calls to the manager and the TPM.
    static let replyMilliseconds = 60_000

    let login: Login

    func run() -> LoginOutcome {
        let options = login.options
        guard options.mode != .confirm else {
            login.log(
                LOG_ERR,
                "mode=confirm needs root (it signs with this host's key); a host without root uses mode=local through xignd"
            )
            return .misconfigured(.confirmWithoutRoot)
        }
        let caller = login.caller
        let request = DaemonLoginRequest(
            user: caller.user, service: caller.service, ruser: caller.ruser, rhost: caller.rhost, tty: caller.tty,
            arguments: options.arguments,
            silent: options.silent)
        do {
            let connection = try DaemonConnection.connect(path: options.daemonSocket, timeoutMilliseconds: 5_000)
            guard connection.peerCredentials()?.uid == 0 else {
                login.log(LOG_ERR, "the process at \(options.daemonSocket) is not root's; it is not xignd")
                return .unavailable(.daemonImpostor)
            }
            try connection.send(DaemonRequest.login(request), deadline: .deadline(in: 5_000))
            while true {
                switch try connection.receive(DaemonReply.self, deadline: .deadline(in: Self.replyMilliseconds)) {
                case .prompt(let text, let echo):
                    let answer = try login.ask(text, echo: echo)
                    try connection.send(DaemonRequest.answer(text: answer), deadline: .deadline(in: 5_000))
                case .message(let text, let isError):
                    // xignd ran the login with this one's options, PAM_SILENT included: what it sends is to be shown.
                    login.dialogue.instruct(text, isError: isError)
                case .loginEnded(let outcome):
                    return outcome
                case .failure(.busy(let message)):
                    login.log(LOG_ERR, "xignd is busy: \(message)")
                    return unavailable()
                case .failure(let failure):
                    login.tell("XignIn: \(failure.message)", isError: true)
                    return .refused(.byDaemon)
                default:
                    login.log(LOG_ERR, "xignd answered a login with a reply that does not belong to it")
                    return .misconfigured(.daemonProtocol)
                }
            }
        } catch is ConversationFailed {
            return .conversationFailed
        } catch {
            login.log(LOG_ERR, "\(error) (socket \(options.daemonSocket))")
            return unavailable()
        }
    }

    private func unavailable() -> LoginOutcome {
        if login.options.failMode == .safe { return .ignored(.daemonUnavailable) }
        login.tell(
            "XignIn cannot check your PIN: the xignd service does not answer. Ask your administrator to start xignd.socket.",
            isError: true)
        return .unavailable(.daemon)
    }
}
