import FoundationEssentials
import XignCrypto
import XignProtocol

/// The biometric factor's binding to the user's enrolled fingers (Nevis's invalidateOnNewOsBiometrics): a device adds
/// the factor with a digest of them, and a login with the finger must bring the same digest. Where the fingers
/// changed, the factor is removed, which is audited, and the user adds it again after a login with the PIN.
extension IdentityManager {
    /// Passes where the device's biometric factor is not bound, or bound to `presented`.
    func checkFingerEnrolment(
        _ presented: String?, of device: ManagerStore.DeviceRecord,
        for authentication: ManagerStore.PendingAuthentication, service: String
    ) async throws {
        guard let recorded = device.biometricEnrolment else { return }
        if let presented, constantTimeEquals(Data(recorded.utf8), Data(presented.utf8)) { return }
        try await database.transaction { store in
            // Another login may have removed it already; then there is nothing left to remove or audit.
            guard let current = try await store.device(device.id), current.biometricEnrolment == recorded else {
                return
            }
            try await store.setFactors(
                current.factors.subtracting([.biometric]), biometricEnrolment: nil, ofDevice: device.id)
            try await store.recordAudit(
                AuditEvent(
                    .biometricInvalidated, email: authentication.email, activationId: authentication.activationId,
                    host: authentication.host,
                    service: service,
                    detail:
                        "the enrolled fingers of \(authentication.localUser) changed; the biometric factor was removed",
                    actor: "device \(device.id)"))
        }
        throw ManagerError(
            .forbidden, .biometricInvalidated,
            "the fingers enrolled on this machine changed since the fingerprint was added as a factor, so it was removed; "
                + "log in with your PIN and run xign-setup add-factor biometric to use it again")
    }
}
