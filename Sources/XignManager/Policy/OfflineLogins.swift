import Foundation
import Logging
import XignCrypto
import XignManagerConfiguration
import XignProtocol

/// Offline login (docs/security.md, "Offline login"): the policy a device is sent, and what it reports back.
/// The manager never sees an offline attempt as it happens; it charges the wrong PINs to the activation's lockout
/// when the device is next online, and writes the logins to the audit.
struct OfflineLogins: Sendable {
    let database: Database
    let configuration: ManagerConfiguration
    let logger: Logger

    /// The account's own policy, else the manager's; no offline login for keys that are not in a TPM.
    func policy(
        keyKind: KeyKind, reportedThrough: Int64, of activation: ManagerStore.ActivationRecord
    ) -> OfflinePolicyMessage {
        OfflinePolicyMessage(
            graceMilliseconds: keyKind == .tpm
                ? (activation.offlineGraceMilliseconds ?? configuration.offline.graceMilliseconds) : 0,
            maxFailures: activation.offlineMaxFailures ?? configuration.offline.maxFailures,
            pinGeneration: activation.pinGeneration,
            reportedThrough: reportedThrough)
    }

    func policy(
        for device: ManagerStore.DeviceRecord, of activation: ManagerStore.ActivationRecord
    ) -> OfflinePolicyMessage {
        policy(keyKind: device.keyKind, reportedThrough: device.offlineReportedThrough, of: activation)
    }

    /// Records the events of a device's report that are new (a report repeated after a lost answer adds nothing):
    /// each wrong PIN is one failure of the activation's lockout, each login an audit entry. Synced: a charge must hold.
    func recordOfflineReport(_ report: OfflineReportMessage, deviceId: String, host: String) async throws {
        guard let last = report.events.last else { return }
        let now = IdentityManager.now()
        let lockout = configuration.lockout
        let charged = try await database.transaction { store -> Int in
            let device = try await DeviceEligibility.enrolledDevice(deviceId, in: store)
            let fresh = report.events.filter { $0.sequence > device.offlineReportedThrough }
            guard !fresh.isEmpty,
                try await store.advanceOfflineReport(
                    ofDevice: device.id, from: device.offlineReportedThrough, to: last.sequence),
                let activation = try await store.activation(id: device.activationId)
            else { return 0 }
            var failures = activation.failedAttempts
            let dates = ISO8601DateFormatter()
            for event in fresh {
                // The device's clock, within reason: never in the future, never before the audit keeps anything.
                let at = min(max(event.at, now - configuration.auditKeepMilliseconds), now)
                let when = dates.string(from: Date(timeIntervalSince1970: Double(at) / 1000))
                switch event.kind {
                case .login:
                    try await store.recordAudit(
                        AuditEvent(
                            at: at, event: .offlineLogin, email: activation.email, activationId: activation.id,
                            host: host, service: event.service,
                            detail: "offline, PIN checked by the device's TPM at \(when)", actor: "device \(device.id)")
                    )
                case .wrongPIN:
                    failures += 1
                    let lock = lockout.lock(afterFailures: failures, now: now)
                    try await store.chargeOfflineFailure(lock, activationId: activation.id)
                    try await PINChecker.auditWrongPIN(
                        lock, of: activation,
                        for: PINChecker.Purpose(service: event.service, host: host, actor: "device \(device.id)"),
                        at: at,
                        cause: "wrong offline PIN at \(when)", in: store)
                }
            }
            if report.droppedLogins > 0 {
                try await store.recordAudit(
                    AuditEvent(
                        .offlineLogin, email: activation.email, activationId: activation.id, host: host,
                        detail: "\(report.droppedLogins) more offline login(s) the device could not list",
                        actor: "device \(device.id)"))
            }
            return fresh.count { $0.kind == .wrongPIN }
        }
        if charged > 0 {
            logger.notice("wrong offline PINs charged", metadata: ["device": "\(deviceId)", "failures": "\(charged)"])
        }
    }
}
