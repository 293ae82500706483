import FoundationEssentials
import XignProtocol

/// How a login a host asks to confirm ended at this device.
public enum LoginApprovalResult: Sendable, Equatable {
    case approved(loginName: String, relyingPartyName: String)
    /// The PIN was wrong; the lock it caused.
    case lockout(LockoutAttemptInformation)
}

/// Lists, approves and denies the logins waiting for one local user's enrolments. `SdkLoginApprover` does it with
/// this machine's state and keys (root, xignd); a caller without root goes through xignd, which uses one.
public protocol LoginApprover {
    /// The logins waiting; with `waitMilliseconds`, waits up to that long for one to arrive.
    func pendingConfirmations(waitMilliseconds: Int) throws -> [PendingConfirmation]
    func approve(_ confirmation: PendingConfirmation, code: String, pin: String) throws -> LoginApprovalResult
    func deny(_ confirmation: PendingConfirmation) throws
}

/// Approvals with this machine's own state and keys: for root, and inside xignd.
public struct SdkLoginApprover: LoginApprover {
    let sdk: XignSdk

    public init(sdk: XignSdk) { self.sdk = sdk }

    /// The local user's enrolments; none is an error that says what to do.
    func enrolments() throws -> [IdentityManagerEntity] {
        let enrolments = try sdk.store.list().filter { UserName.same($0.localUser, sdk.localUser) }
        guard !enrolments.isEmpty else {
            throw XignSdkError(
                .identityManagerNotFound, "\(sdk.localUser) has no enrolment on this machine; personalize it first")
        }
        return enrolments
    }

    /// A confirmation named by a caller is acted on only with an enrolment of this local user.
    func owned(_ confirmation: PendingConfirmation) throws -> IdentityManagerEntity {
        guard let enrolment = try enrolments().first(where: { $0.idmIdentifier == confirmation.idmIdentifier }) else {
            throw XignSdkError(
                .identityManagerNotFound,
                "\(sdk.localUser) has no enrolment \(confirmation.idmIdentifier.prefix(64)) on this machine")
        }
        return enrolment
    }

    public func pendingConfirmations(waitMilliseconds: Int) throws -> [PendingConfirmation] {
        var found: [PendingConfirmation] = []
        // With several enrolments, the wait is spent on the first and the others are asked without waiting.
        for (index, enrolment) in try enrolments().enumerated() {
            found += try sdk.authenticator.fetchPendingConfirmations(
                idmIdentifier: enrolment.idmIdentifier, waitMilliseconds: index == 0 ? waitMilliseconds : 0)
        }
        return found
    }

    public func approve(_ confirmation: PendingConfirmation, code: String, pin: String) throws -> LoginApprovalResult {
        let enrolment = try owned(confirmation)
        let authenticator = sdk.authenticator
        let request = try authenticator.startAuthenticationSynchronous(
            confirmation: ConfirmationInitializationData(
                idmIdentifier: enrolment.idmIdentifier, confirmationId: confirmation.confirmationId, code: code))
        let signed = try authenticator.signWithDeviceAndPinSynchronous(
            request: request, pin: { pin },
            incomplete: XignSdkError(.parametersIncomplete, "the manager asks for information an approval cannot give"))
        switch try authenticator.finishConfirmationSynchronous(userInfo: signed) {
        case .userLogin(let login):
            return .approved(loginName: login.loginName, relyingPartyName: login.relyingPartyName)
        case .lockout(let lock, _): return .lockout(lock)
        }
    }

    public func deny(_ confirmation: PendingConfirmation) throws {
        try sdk.authenticator.denyConfirmation(
            idmIdentifier: try owned(confirmation).idmIdentifier, confirmationId: confirmation.confirmationId)
    }
}
