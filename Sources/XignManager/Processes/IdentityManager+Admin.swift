import Foundation
import XignCrypto
import XignProtocol

/// What `xign-manager admin` shows and changes.
extension IdentityManager {
    public struct AccountSummary: Codable, Sendable {
        public var email: String
        public var loginName: String?
        /// The uid hosts give the login name; its private group's gid is the same number.
        public var uid: Int64?
        /// Whether hosts may log the account in as their own local user of its login name, whatever its uid (H5).
        public var mapsLocalUser = false
        /// The name the registrant asked for, until an administrator gives one.
        public var requestedLoginName: String?
        /// The host groups the account may log in to (`*`: every host); empty means none.
        public var hostGroups: [String]
        /// The local groups its host groups join on their hosts.
        public var localGroups: [String] = []
        public var organization: String?
        public var isTemporary: Bool
        public var activations: Int
        public var createdAt: Int64
    }

    public struct ActivationSummary: Codable, Sendable {
        public var id: String
        public var email: String
        public var alias: String
        public var state: ActivationState
        public var deviceId: String?
        public var keyKind: KeyKind?
        /// The device that holds the activation (Nevis's device information); nil while none does.
        public var deviceName: String?
        public var platform: String?
        public var factors: [AuthenticatorType]?
        public var enrolledAt: Int64?
        public var lastUsedAt: Int64?
        /// A passkey device's credential id, and whether it may be copied to other devices (a synced passkey).
        public var credentialId: String?
        public var synced: Bool?
        /// A TPM key's attestation: the EK certificate's issuer, or why the key is not attested.
        public var ekIssuer: String?
        public var unattestedBecause: String?
        public var failedAttempts: Int
        public var lockedUntil: Int64
        public var permanentlyLocked: Bool
    }

    /// Logins waiting for approval on a device, across all accounts (the /metrics gauge).
    func pendingConfirmationCount() async throws -> Int {
        try await database.read { store in try await store.pendingConfirmationCount(now: Self.now()) }
    }

}
