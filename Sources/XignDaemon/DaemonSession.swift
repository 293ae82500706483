import Foundation
import XignCore
import XignLogin
import XignProtocol

/// One connection: who is calling (SO_PEERCRED), whether it may act for the user it names, and the request.
struct DaemonSession {
    let connection: DaemonConnection
    let peer: DaemonConnection.PeerCredentials
    let daemon: Daemon

    /// The first request must arrive this soon; an idle client holds no connection longer.
    static let requestMilliseconds = 10_000
    /// A person types a PIN within this time.
    static let answerMilliseconds = 120_000
    static let replyMilliseconds = 5_000
    /// The manager holds a wait for pending confirmations at most 25 s.
    static let longestWaitMilliseconds = 25_000

    func run() {
        let request: DaemonRequest
        do {
            request = try connection.receive(DaemonRequest.self, deadline: .deadline(in: Self.requestMilliseconds))
        } catch {
            daemon.log(LOG_WARNING, "uid=\(peer.uid) pid=\(peer.pid): no request: \(error)")
            return
        }
        guard let user = request.user else {
            return reply(.failure(.refused(message: "a connection starts with a request")))
        }
        guard let target = LocalUser(named: user) else {
            return reply(.failure(.refused(message: "there is no local user \(user.prefix(64))")))
        }
        // The unix_chkpwd rule: a caller that is not root acts only for the user of its own uid.
        guard peer.uid == 0 || peer.uid == target.uid else {
            daemon.log(LOG_WARNING, "uid=\(peer.uid) pid=\(peer.pid) asked for user=\(target.name): refused")
            return reply(
                .failure(.refused(message: "you may use only your own XignIn enrolment, not that of \(target.name)")))
        }
        switch request {
        case .login(let login): runLogin(login, for: target)
        case .pendingConfirmations(_, let wait):
            reply(
                Self.answer {
                    .pendingConfirmations(
                        try approver(for: target).pendingConfirmations(
                            waitMilliseconds: max(0, min(wait, Self.longestWaitMilliseconds))))
                })
        case .approve(_, let confirmation, let code, let pin):
            guard charge(target) else { return }
            reply(
                Self.answer {
                    switch try approver(for: target).approve(confirmation, code: code, pin: pin) {
                    case .approved(let loginName, let relyingPartyName):
                        try? daemon.attempts.reset(String(target.uid))
                        return .approved(loginName: loginName, relyingPartyName: relyingPartyName)
                    case .lockout(let lock):
                        return .lockout(lock)
                    }
                })
        case .deny(_, let confirmation):
            reply(
                Self.answer {
                    try approver(for: target).deny(confirmation)
                    return .denied
                })
        case .answer:
            reply(.failure(.refused(message: "an answer without a prompt")))
        }
    }

    /// The module's own login, run here with xignd's configuration and the caller's conversation.
    private func runLogin(_ request: DaemonLoginRequest, for target: LocalUser) {
        var options: LoginOptions
        do { options = try LoginOptions(arguments: request.arguments) } catch {
            daemon.log(LOG_ERR, "uid=\(peer.uid): the caller's module arguments: \(error)")
            return reply(.loginEnded(outcome: .misconfigured(.configuration)))
        }
        options.configPath = daemon.configPath
        options.mode = .local
        options.silent = request.silent
        // Only a login that will check a PIN takes from the allowance: with the shared stack every user's locker
        // comes here, and a user without an enrolment must not be told of PIN attempts.
        let enrolled =
            (try? XignSdk(configuration: daemon.configuration, localUser: target.name).store.list().contains {
                UserName.same($0.localUser, target.name)
            }) ?? true
        if enrolled { guard charge(target, pamStyle: true) else { return } }
        let caller = LoginCaller(
            user: target.name, service: request.service, ruser: request.ruser, rhost: request.rhost, tty: request.tty,
            process: peer.pid, uid: peer.uid)
        let log: (Int32, String) -> Void = { priority, message in
            daemon.log(priority, "uid=\(peer.uid) pid=\(peer.pid) \(message)")
        }
        let outcome = Login(
            caller: caller, options: options, conversation: RelayConversation(connection: connection), log: log
        ).run()
        if outcome.isSuccess { try? daemon.attempts.reset(String(target.uid)) }
        reply(.loginEnded(outcome: outcome))
    }

    /// Takes one PIN attempt from the target's allowance; a refusal is answered here.
    private func charge(_ target: LocalUser, pamStyle: Bool = false) -> Bool {
        let verdict: AttemptLimit.Verdict
        do { verdict = try daemon.attempts.charge(String(target.uid)) } catch {
            daemon.log(LOG_ERR, "cannot record the attempt: \(error)")
            reply(
                .failure(
                    .sdk(
                        code: .stateUnavailable,
                        message: "xignd cannot record the attempt; ask your administrator to look at its log")))
            return false
        }
        guard case .refused(let seconds) = verdict else { return true }
        daemon.log(LOG_WARNING, "uid=\(peer.uid) user=\(target.name): attempt limit reached")
        let text = "Too many PIN attempts for \(target.name) on this machine; try again in \(seconds) s."
        if pamStyle {
            reply(.message(text: "XignIn: " + text, isError: true))
            reply(.loginEnded(outcome: .attemptLimitReached))
        } else {
            reply(.failure(.attemptLimitReached(message: text)))
        }
        return false
    }

    private func approver(for target: LocalUser) throws -> SdkLoginApprover {
        SdkLoginApprover(sdk: try XignSdk(configuration: daemon.configuration, localUser: target.name))
    }

    private static func answer(_ body: () throws -> DaemonReply) -> DaemonReply {
        do { return try body() } catch { return DaemonReply(error) }
    }

    private func reply(_ message: DaemonReply) {
        do { try connection.send(message, deadline: .deadline(in: Self.replyMilliseconds)) } catch {
            daemon.log(LOG_WARNING, "uid=\(peer.uid) pid=\(peer.pid): cannot reply: \(error)")
        }
    }
}

/// The caller's PAM conversation, over the connection.
struct RelayConversation: Conversation {
    let connection: DaemonConnection

    func ask(_ text: String, echo: Bool) throws -> String {
        do {
            try connection.send(
                DaemonReply.prompt(text: text, echo: echo), deadline: .deadline(in: DaemonSession.replyMilliseconds))
            guard
                case .answer(let answer) = try connection.receive(
                    DaemonRequest.self, deadline: .deadline(in: DaemonSession.answerMilliseconds))
            else {
                throw ConversationFailed()
            }
            return answer
        } catch { throw ConversationFailed() }
    }

    func show(_ text: String, isError: Bool) throws {
        do {
            try connection.send(
                DaemonReply.message(text: text, isError: isError),
                deadline: .deadline(in: DaemonSession.replyMilliseconds))
        } catch {
            throw ConversationFailed()
        }
    }
}
