import FoundationEssentials
import XignCore

/// How one login ended. Front ends map it to their own codes (pam_xign: one table in XignPAM); xignd sends it to
/// the module as it is, so the daemon's protocol knows nothing of PAM.
public enum LoginOutcome: Codable, Sendable, Equatable {
    /// The manager checked this machine's device key and the factors the role asks for.
    case signedIn
    /// The user approved the login on an enrolled device.
    case confirmed
    /// A sudo in a session whose SSH login the user approved, where the host's policy lets that approval cover it.
    case covered
    /// The manager could not be reached, and this machine's TPM accepted the PIN (offline login).
    case signedInOffline
    /// Offline, the TPM refused the PIN; how many more wrong ones offline login allows.
    case wrongOfflinePIN(wrongPINsLeft: Int)
    /// The PIN was wrong; the lock it caused.
    case wrongPIN(LockoutAttemptInformation)
    /// A lock was already in force, so nothing was checked.
    case locked(LockoutAttemptInformation)
    /// This machine's own allowance of PIN attempts (xignd's, or a setuid caller's for another user) is spent.
    case attemptLimitReached
    /// Neither this machine nor the manager knows the user.
    case unknownUser
    /// The module stays out of the decision, as its arguments ask.
    case ignored(Ignored)
    /// What the login needs cannot be reached; trying later may work.
    case unavailable(Unavailable)
    case refused(Refusal)
    /// The administrator must fix something before anyone can log in this way.
    case misconfigured(Misconfiguration)
    /// The application's conversation failed (the user went away).
    case conversationFailed

    /// Why the module stayed out (PAM_IGNORE); the raw value is the log's word.
    public enum Ignored: String, Codable, Sendable {
        case unknownUser = "unknown-user-ignored"
        case managerUnreachable = "unreachable-ignored"
        case remoteLogin = "remote-ignored"
        case daemonUnavailable = "xignd-unavailable-ignored"
    }

    /// What could not be reached; the raw value is the log's word.
    public enum Unavailable: String, Codable, Sendable {
        case manager = "unreachable"
        case tpm = "tpm-unavailable"
        case daemon = "xignd-unavailable"
        /// The socket's owner is not root, so it is not xignd.
        case daemonImpostor = "xignd-impostor"
    }

    /// Why a login was refused; the raw value is the log's word.
    public enum Refusal: String, Codable, Sendable {
        case denied
        case expired
        case noPIN = "no-pin"
        case attributeInvalid = "attribute-invalid"
        case attributeMissing = "attribute-missing"
        case factorMissing = "factor-missing"
        case remoteLogin = "remote-refused"
        case otherUsersEnrolment = "other-user-refused"
        case systemAccount = "system-account"
        case accountLocked = "account-locked"
        case securityInsufficient = "security-insufficient"
        case deviceKey = "device-key"
        case biometricMismatch = "biometric-mismatch"
        case biometricUnavailable = "biometric-unavailable"
        /// The enrolled fingers changed since the factor was added, which removed it.
        case biometricInvalidated = "biometric-invalidated"
        case notEnrolled = "not-enrolled"
        case tooManyRequests = "too-many-requests"
        case hostNotAllowed = "host-not-allowed"
        case localUserMismatch = "local-user-mismatch"
        /// xignd refused the request before the login began.
        case byDaemon = "xignd-refused"
        /// Any other refusal from the manager, or an answer that does not fit the request.
        case other = "refused"
    }

    /// What the administrator must fix; the raw value is the log's word.
    public enum Misconfiguration: String, Codable, Sendable {
        case configuration = "config-error"
        case state = "state-error"
        case role = "no-role"
        case notAHost = "not-a-host"
        case confirmWithoutRoot = "confirm-without-root"
        /// A confirmation at a greeter that shows no text (SDDM): nobody could read its code.
        case confirmWithoutText = "confirm-without-text"
        case daemonProtocol = "xignd-error"
    }

    /// One word for the log line, stable for the administrator's grep.
    public var logWord: String {
        switch self {
        case .signedIn: "success"
        case .confirmed: "confirmed"
        case .covered: "covered"
        case .signedInOffline: "offline-success"
        case .wrongOfflinePIN: "offline-wrong-pin"
        case .wrongPIN(let lock): lock.isPermanent ? "locked-permanently" : "wrong-pin"
        case .locked(let lock): lock.isPermanent ? "locked-permanently" : "locked"
        case .attemptLimitReached: "attempt-limit"
        case .unknownUser: "unknown-user"
        case .ignored(let reason): reason.rawValue
        case .unavailable(let reason): reason.rawValue
        case .refused(let reason): reason.rawValue
        case .misconfigured(let reason): reason.rawValue
        case .conversationFailed: "conversation-error"
        }
    }

    public var isSuccess: Bool { [.signedIn, .confirmed, .covered, .signedInOffline].contains(self) }
}
