import Foundation
import Logging
import XignCrypto
import XignManagerConfiguration
import XignProtocol

/// The decision on a waiting login, the same for both approval protocols (a device's authentication for the
/// confirmation, a passkey's one-request approval): the typed code first (number matching, wrong codes counted), and
/// once device and PIN passed, the approval that wakes the host.
struct ConfirmationDecision: Sendable {
    let database: Database
    let settings: ManagerConfiguration.Confirmation
    let wakeUps: WakeUps
    let logger: Logger

    /// Checks the code typed on the approving device against the one the host showed, before anything else of
    /// an approval. Wrong codes are counted in their own transaction; too many deny the confirmation.
    func checkCode(
        _ code: String?, confirmationId: String, deviceId: String
    ) async throws -> ManagerStore.ConfirmationRecord {
        let presented = Data((code ?? "").utf8)
        enum Verdict: Sendable {
            case right(ManagerStore.ConfirmationRecord)
            case wrong(left: Int, accountId: String)
            case foreign
        }
        let verdict = try await database.transaction { store -> Verdict in
            guard let confirmation = try await store.confirmation(confirmationId),
                confirmation.state(at: IdentityManager.now()) == .pending
            else {
                throw ManagerError(
                    .conflict, .sessionInvalid,
                    "the confirmation is unknown, decided already, expired, or not for your account")
            }
            guard confirmation.accountId == (try await store.accountId(ofDevice: deviceId)) else {
                try await store.recordAudit(
                    Self.refusedApproval(
                        confirmation, by: deviceId, email: nil,
                        because: "a device of another account tried to approve it"))
                return .foreign
            }
            try await store.markOpened(confirmation.id, now: IdentityManager.now())
            if constantTimeEquals(presented, Data(confirmation.code.utf8)) { return .right(confirmation) }
            let failures = try await store.recordWrongConfirmationCode(confirmation.id)
            if failures >= settings.maxCodeFailures {
                _ = try await store.decideConfirmation(
                    confirmation.id, state: .denied, approvedBy: nil, now: IdentityManager.now())
            }
            let email =
                try await store.device(deviceId).asyncMap { try await store.activation(id: $0.activationId)?.email }
                ?? nil
            try await store.recordAudit(
                Self.refusedApproval(
                    confirmation, by: deviceId, email: email,
                    because:
                        "wrong code (\(failures) of \(settings.maxCodeFailures))\(failures >= settings.maxCodeFailures ? "; the login is refused" : "")"
                ))
            return .wrong(left: max(0, settings.maxCodeFailures - failures), accountId: confirmation.accountId)
        }
        switch verdict {
        case .foreign:
            throw ManagerError(
                .conflict, .sessionInvalid,
                "the confirmation is unknown, decided already, expired, or not for your account")
        case .right(let confirmation):
            return confirmation
        case .wrong(let left, let accountId):
            if left == 0 { await wakeUps.wake(WakeUps.keys(confirmation: confirmationId, account: accountId)) }
            logger.notice(
                "wrong confirmation code",
                metadata: ["confirmation": "\(confirmationId)", "device": "\(deviceId)", "left": "\(left)"])
            throw ManagerError(
                .unprocessableContent, .wrongCode,
                left > 0
                    ? "that is not the code the server shows; \(left) attempt(s) left"
                    : "that is not the code the server shows; the login was refused. Start it again on the server")
        }
    }

    /// An approval the manager refused, for `admin audit`: the host and its service, the device that tried, and why.
    static func refusedApproval(
        _ confirmation: ManagerStore.ConfirmationRecord, by deviceId: String, email: String?, because reason: String
    ) -> AuditEvent {
        AuditEvent(
            .approvalRefused, email: email, host: confirmation.hostName, service: confirmation.service,
            detail: "\(reason); login \(confirmation.loginName.prefix(64))", actor: "device \(deviceId)")
    }

    /// Why a denied confirmation ended: a count of wrong codes denies it as the user's refusal does, and the two are
    /// told apart by that count.
    func ending(of record: ManagerStore.ConfirmationRecord, in state: ConfirmationState) -> ConfirmationEnding? {
        guard state == .denied else { return nil }
        return record.codeFailures >= settings.maxCodeFailures ? .wrongCodes : .denied
    }

    /// The device's user approved the confirmation with device and PIN: the host that waits may let them in.
    func approve(
        _ confirmationId: String, by deviceId: String, of activationId: String, email: String,
        at service: ManagerConfiguration.Service,
        role: String
    ) async throws -> UserLoginMessage {
        let confirmation = try await database.transaction { store -> ManagerStore.ConfirmationRecord in
            guard let confirmation = try await store.confirmation(confirmationId),
                try await store.decideConfirmation(
                    confirmationId, state: .approved, approvedBy: deviceId, now: IdentityManager.now())
            else {
                throw ManagerError(
                    .conflict, .sessionInvalid,
                    "the login was decided or ran out meanwhile; start it again on the server")
            }
            let credential =
                try await store.device(deviceId)?.passkey.map { ", passkey credential \($0.credentialId.prefix(64))" }
                ?? ""
            try await store.recordAudit(
                AuditEvent(
                    at: IdentityManager.now(), event: .login, email: email, activationId: activationId,
                    host: confirmation.hostName, service: confirmation.service,
                    detail: "approved on a device, role \(role)\(credential)",
                    actor: "device \(deviceId)"
                ))
            try await store.recordUse(ofDevice: deviceId, at: IdentityManager.now())
            return confirmation
        }
        await wakeUps.wake(WakeUps.keys(confirmation: confirmationId, account: confirmation.accountId))
        logger.info(
            "confirmation approved",
            metadata: [
                "confirmation": "\(confirmationId)", "device": "\(deviceId)", "host": "\(confirmation.hostName)",
            ])
        return UserLoginMessage(relyingPartyName: confirmation.hostName, role: role, loginName: confirmation.loginName)
    }

}
