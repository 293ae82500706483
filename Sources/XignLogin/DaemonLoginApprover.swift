import FoundationEssentials
import XignCore

/// Approvals for a caller without root: xignd does them with the enrolments bound to the caller's own uid.
public struct DaemonLoginApprover: LoginApprover {
    let user: String
    let socketPath: String
    /// How long xignd may take beyond a wait: its own calls to the manager.
    static let answerMilliseconds = 60_000

    public init(user: String, socketPath: String = DaemonConnection.defaultSocketPath) {
        self.user = user
        self.socketPath = socketPath
    }

    public func pendingConfirmations(waitMilliseconds: Int) throws -> [PendingConfirmation] {
        switch try exchange(
            .pendingConfirmations(user: user, waitMilliseconds: waitMilliseconds), waiting: waitMilliseconds)
        {
        case .pendingConfirmations(let list): return list
        case let reply: throw unexpected(reply)
        }
    }

    public func approve(_ confirmation: PendingConfirmation, code: String, pin: String) throws -> LoginApprovalResult {
        switch try exchange(.approve(user: user, confirmation: confirmation, code: code, pin: pin)) {
        case .approved(let loginName, let relyingPartyName):
            return .approved(loginName: loginName, relyingPartyName: relyingPartyName)
        case .lockout(let lock): return .lockout(lock)
        case let reply: throw unexpected(reply)
        }
    }

    public func deny(_ confirmation: PendingConfirmation) throws {
        switch try exchange(.deny(user: user, confirmation: confirmation)) {
        case .denied: return
        case let reply: throw unexpected(reply)
        }
    }

    private func exchange(_ request: DaemonRequest, waiting: Int = 0) throws -> DaemonReply {
        do {
            let connection = try DaemonConnection.connect(path: socketPath, timeoutMilliseconds: 5_000)
            try connection.send(request, deadline: .deadline(in: 5_000))
            return try connection.receive(DaemonReply.self, deadline: .deadline(in: waiting + Self.answerMilliseconds))
        } catch let failure as DaemonConnection.Failure {
            throw XignSdkError(
                .stateUnavailable,
                "\(failure); without root, xign-setup needs xignd (systemctl enable --now xignd.socket)")
        }
    }

    private func unexpected(_ reply: DaemonReply) -> XignSdkError {
        if case .failure(let failure) = reply { return failure.error }
        return XignSdkError(.stateUnavailable, "xignd gave an answer that does not fit the request")
    }
}
