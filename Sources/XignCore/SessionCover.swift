import FoundationEssentials
import XignCrypto
import XignDevice
import XignProtocol

/// A cover the manager opened for a session on this host, as it signed it.
public struct SessionCover: Sendable, Equatable, Codable {
    public let coverId: String
    /// The approval (confirmation) of the login whose session it covers.
    public let confirmationId: String
    public let loginName: String
    public let auditSession: Int64
    /// Milliseconds since 1970, by the manager's clock.
    public let expiresAt: Int64
}

extension XignSdk {
    /// Asks the manager to let the approval of `loginName`'s login cover its audit session.
    public func openSessionCover(confirmationId: String, loginName: String, auditSession: Int64) throws -> SessionCover
    {
        try coverCall(APIPath.sessionCovers, loginName: loginName, auditSession: auditSession) {
            host, challenge, nonce in
            SessionCoverRequest(
                hostId: host.hostId, challenge: challenge, nonce: nonce, confirmationId: confirmationId,
                loginName: loginName, auditSession: auditSession)
        }
    }

    /// Asks whether `cover` still lets `service` in, for its session; the manager audits the login it stands for.
    public func useSessionCover(_ cover: SessionCover, service: String) throws -> SessionCover {
        let used = try coverCall(APIPath.sessionCoverUse, loginName: cover.loginName, auditSession: cover.auditSession)
        {
            host, challenge, nonce in
            SessionCoverUseRequest(
                hostId: host.hostId, challenge: challenge, nonce: nonce, coverId: cover.coverId,
                loginName: cover.loginName, service: service, auditSession: cover.auditSession)
        }
        guard used.coverId == cover.coverId else {
            throw XignSdkError(.managerSignatureInvalid, "the manager's answer is about another cover")
        }
        return used
    }

    /// Tells the manager the session closed.
    public func endSessionCover(_ cover: SessionCover) throws {
        let call = try hostCall()
        let body = try JSONEncoder.canonical.encode(
            SessionCoverEndRequest(hostId: call.host.hostId, challenge: call.challenge, coverId: cover.coverId))
        _ = try call.client.exchange(
            "POST", APIPath.sessionCoverEnd, body: body,
            headers: [
                try ManagerClient.signatureHeader(
                    APIPath.sessionCoverEnd, body: body, challenge: call.challenge, key: call.key)
            ])
    }

    /// A host-signed request over a fresh challenge, and the cover the pinned manager key signed for this host, this
    /// login name and this audit session in answer.
    private func coverCall(
        _ path: String, loginName: String, auditSession: Int64,
        _ request: (HostEnrolment, _ challenge: String, _ nonce: String) throws -> some Encodable
    ) throws -> SessionCover {
        let call = try hostCall()
        let nonce = try ManagerClient.nonce()
        let compact = try call.post(
            path, try JSONEncoder.canonical.encode(try request(call.host, call.challenge, nonce)))
        let answer = try ManagerClient.verify(
            compact, type: SignedAnswerType.sessionCover, key: call.managerKey, as: SessionCoverMessage.self,
            nonce: nonce, nonceOf: \.nonce)
        guard answer.hostId == call.host.hostId, UserName.same(answer.loginName, loginName),
            answer.auditSession == auditSession
        else {
            throw XignSdkError(.managerSignatureInvalid, "the manager's cover is for another host, user or session")
        }
        return SessionCover(
            coverId: answer.coverId, confirmationId: answer.confirmationId, loginName: answer.loginName,
            auditSession: answer.auditSession, expiresAt: answer.expiresAt)
    }
}
