import FoundationEssentials
import XignCrypto
import XignDevice
import XignProtocol

// Login confirmation, from both ends: a host (this machine joined with `xign-setup host join`) asks the manager to
// have a user approve a login; the user's enrolled machine lists, approves (Authenticator, service `confirm`) or denies.

/// A login waiting for approval, as the host shows it.
public struct PendingLoginConfirmation: Sendable {
    public let confirmationId: String
    /// What the user types on the approving device.
    public let code: String
    /// The App-Link in QR-friendly case (`ConfirmationPayload.link`), for the QR code.
    public let payload: String
    public let appLink: String
    /// The name the host joined with, shown so the user knows which server asks.
    public let hostName: String
    public let loginName: String
    public let service: String
    /// On the monotonic clock.
    public let expiresAt: MonotonicClock.Instant
    package let waitToken: String
    let nonce: String
    let host: HostEnrolment
    let managerKey: P256PublicKey
}

/// What became of a login a host asked to confirm, as the manager signed it.
public enum LoginConfirmationDecision: Sendable, Equatable {
    case approved(byDevice: String)
    case denied(ConfirmationEnding)
    case expired
    /// Nothing decided yet; wait again.
    case pending
}

/// Which confirmation to approve, with which enrolment, and the code the host shows.
public struct ConfirmationInitializationData: Sendable, Equatable {
    public let idmIdentifier: String
    public let confirmationId: String
    public let code: String

    public init(idmIdentifier: String, confirmationId: String, code: String) {
        self.idmIdentifier = idmIdentifier
        self.confirmationId = confirmationId
        self.code = code
    }
}

/// A confirmation waiting for this device's account, as an approving device shows it (no code: the user types it).
public struct PendingConfirmation: Sendable, Equatable, Codable {
    public let confirmationId: String
    public let host: String
    public let service: String
    public let loginName: String
    public let remoteHost: String?
    public let tty: String?
    public let command: String?
    public let createdAt: Date
    public let idmIdentifier: String
}

extension XignSdk {
    /// The host enrolment for logins on this machine: the first one, or the one for `managerURL`.
    public func hostEnrolment(for managerURL: ManagerURL? = nil) throws -> HostEnrolment {
        guard let host = try hostEnrolments().first(where: { managerURL == nil || $0.managerURL == managerURL }) else {
            throw XignSdkError(
                .hostNotJoined, "this machine has not joined an identity manager as a host; run xign-setup host join")
        }
        return host
    }

    /// Asks the manager to have the account with `loginName` approve this login. Signed with the host key.
    /// `localUid`: this host's user of `loginName`, which the manager confirms only where it is the account's (H5).
    public func startLoginConfirmation(
        loginName: String, service: String, remoteHost: String?, tty: String?, command: String?,
        localUid: Int64? = nil
    ) throws -> PendingLoginConfirmation {
        guard LoginNameValidator.validate(loginName) == .valid else {
            throw XignSdkError(.unknownLoginName, "'\(loginName.prefix(64))' is not a login name the manager can know")
        }
        let call = try hostCall()
        let (host, managerKey) = (call.host, call.managerKey)
        let nonce = try ManagerClient.nonce()
        let request = ConfirmationRequest(
            hostId: host.hostId, challenge: call.challenge, loginName: loginName, service: service,
            remoteHost: remoteHost.map { String($0.prefix(128)) }, tty: tty.map { String($0.prefix(64)) },
            command: command.map { String($0.prefix(128)) }, nonce: nonce, localUid: localUid
        )
        let sentAt = MonotonicClock.now()
        let compact = try call.post(APIPath.confirmations, try JSONEncoder.canonical.encode(request))
        let start = try ManagerClient.verify(
            compact, type: SignedAnswerType.confirmationStart, key: managerKey, as: ConfirmationStartMessage.self,
            nonce: nonce, nonceOf: \.nonce)
        guard ConfirmationPayload.confirmationId(in: start.payload) == start.confirmationId,
            let lifetime = MonotonicClock.lifetime(from: start.issuedAt, to: start.expiresAt)
        else {
            throw XignSdkError(.invalidManagerResponse, "the manager's confirmation start is inconsistent")
        }
        return PendingLoginConfirmation(
            confirmationId: start.confirmationId, code: start.code, payload: start.payload, appLink: start.appLink,
            hostName: host.name,
            loginName: loginName, service: service, expiresAt: sentAt.advanced(by: lifetime),
            waitToken: start.waitToken, nonce: nonce,
            host: host, managerKey: managerKey
        )
    }

    /// Waits up to `milliseconds` for the decision. A decision is believed only when the pinned manager key signed it
    /// for this host, this login name, this service and this start's nonce.
    public func waitForDecision(
        _ pending: PendingLoginConfirmation, upTo milliseconds: Int
    ) throws -> LoginConfirmationDecision {
        let client = ManagerClient(url: pending.host.managerURL, http: http)
        // The manager must answer before the transport gives up.
        let wait = max(0, min(milliseconds, http.configuration.timeoutMilliseconds - 1_000))
        let response = try client.exchange(
            "POST", APIPath.confirmationWait,
            body: try JSONEncoder.canonical.encode(
                ConfirmationWaitRequest(
                    confirmationId: pending.confirmationId, waitToken: pending.waitToken, waitMilliseconds: wait)))
        guard response.contentType?.hasPrefix("application/jose") == true else {
            throw XignSdkError(.invalidManagerResponse, "the manager answered the wait without a signature")
        }
        let result = try ManagerClient.verify(
            String(decoding: response.body, as: UTF8.self), type: SignedAnswerType.confirmationResult,
            key: pending.managerKey, as: ConfirmationResultMessage.self, nonce: pending.nonce, nonceOf: \.nonce)
        guard result.confirmationId == pending.confirmationId, result.hostId == pending.host.hostId else {
            throw XignSdkError(.managerSignatureInvalid, "the manager's decision is for another confirmation or host")
        }
        guard UserName.same(result.loginName, pending.loginName), result.service == pending.service else {
            throw XignSdkError(.managerSignatureInvalid, "the manager's decision is for another user or service")
        }
        switch result.state {
        case .approved:
            guard let device = result.approvedBy, (1...WireLimit.identifier).contains(device.utf8.count) else {
                throw XignSdkError(.invalidManagerResponse, "the manager's approval does not name the device")
            }
            return .approved(byDevice: device)
        case .denied: return .denied(result.endedBecause ?? .denied)
        case .expired, .withdrawn: return .expired
        case .pending: return MonotonicClock.now() < pending.expiresAt ? .pending : .expired
        }
    }
}

extension XignSdk {
    /// Withdraws a confirmation this host started, when its login ends without a decision. Best effort: the
    /// confirmation runs out at the manager anyway.
    public func withdraw(_ pending: PendingLoginConfirmation) {
        let client = ManagerClient(url: pending.host.managerURL, http: http)
        guard
            let body = try? JSONEncoder.canonical.encode(
                ConfirmationWithdrawalRequest(confirmationId: pending.confirmationId, waitToken: pending.waitToken))
        else { return }
        _ = try? client.exchange("POST", APIPath.confirmationWithdrawal, body: body)
    }
}

extension Authenticator {
    /// The confirmations waiting for the account of `idmIdentifier`; with `waitMilliseconds`, the manager holds the
    /// answer until one arrives or the time is up.
    public func fetchPendingConfirmations(
        idmIdentifier: String, waitMilliseconds: Int = 0
    ) throws -> [PendingConfirmation] {
        let (entity, client, key) = try signer(idmIdentifier)
        let challenge = try client.challenge(APIPath.challenges, ChallengeRequest(deviceId: entity.idmIdentifier))
        let nonce = try ManagerClient.nonce()
        let wait = max(0, min(waitMilliseconds, http.configuration.timeoutMilliseconds - 1_000))
        let body = try JSONEncoder.canonical.encode(
            PendingConfirmationsRequest(
                deviceId: entity.idmIdentifier, challenge: challenge, nonce: nonce, waitMilliseconds: wait))
        let compact = try client.postDeviceSigned(
            APIPath.confirmationsPending, body: body, challenge: challenge, key: key)
        let list = try ManagerClient.verify(
            compact, type: SignedAnswerType.confirmationList, key: try entity.pinnedManagerKey(),
            as: ConfirmationListMessage.self, nonce: nonce, nonceOf: \.nonce)
        return list.confirmations.compactMap { item in
            guard
                ConfirmationPayload.confirmationId(in: ConfirmationPayload.prefix + item.confirmationId)
                    == item.confirmationId
            else { return nil }
            return PendingConfirmation(
                confirmationId: item.confirmationId, host: String(item.host.prefix(253)),
                service: String(item.service.prefix(64)),
                loginName: String(item.loginName.prefix(32)),
                remoteHost: item.remoteHost.map { String($0.prefix(128)) },
                tty: item.tty.map { String($0.prefix(64)) },
                command: item.command.map { String($0.prefix(128)) },
                createdAt: Date(millisecondsSince1970: item.createdAt),
                idmIdentifier: entity.idmIdentifier
            )
        }
    }

    /// Refuses a confirmation; the account gets a short cool-down against repeated requests.
    public func denyConfirmation(idmIdentifier: String, confirmationId: String) throws {
        let (entity, client, key) = try signer(idmIdentifier)
        let challenge = try client.challenge(APIPath.challenges, ChallengeRequest(deviceId: entity.idmIdentifier))
        let body = try JSONEncoder.canonical.encode(
            ConfirmationDenialRequest(
                deviceId: entity.idmIdentifier, challenge: challenge, confirmationId: confirmationId))
        _ = try client.exchange(
            "POST", APIPath.confirmationDenial, body: body,
            headers: [
                try ManagerClient.signatureHeader(
                    APIPath.confirmationDenial, body: body, challenge: challenge, key: key)
            ])
    }

    private func signer(_ idmIdentifier: String) throws -> (IdentityManagerEntity, ManagerClient, any DeviceKey) {
        let entity = try store.entity(idmIdentifier)
        return (
            entity, ManagerClient(url: entity.managerURL, http: http),
            try keys.load(entity.keyKind, entity.keyReference, what: "device")
        )
    }
}
