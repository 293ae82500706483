import FoundationEssentials
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// Every error the SDK raises. `errorCode` says what happened; `message` says it for people, with the next step.
public enum XignSdkErrorCode: String, Codable, Sendable, CaseIterable {
    // Input
    case invalidInput
    case activationDataInvalid
    case parametersIncomplete
    // Transport
    case insecureTransport
    case managerUnreachable
    /// Something answered, but not in HTTP that could be read (no reason to log in offline).
    case transportFailure
    case timeout
    case tlsFailure
    // The manager's answers
    case invalidManagerResponse
    case managerSignatureInvalid
    case managerKeyMismatch
    case managerRejectedRequest
    case managerInternalError
    /// The manager answered that it is overloaded or cannot reach its database: an answer, so never a reason to log
    /// in offline (docs/security.md, H7); the login is unavailable by its fail mode, and trying again later may work.
    case managerBusy
    // Activation state
    case activationNotFound
    case activationRevoked
    case lockedOut
    case sessionExpired
    case pinPolicyViolation
    case securityInsufficient
    case deviceNotEnrolled
    // Login confirmation
    /// No account at the manager has the login name a host asked for.
    case unknownLoginName
    /// Too many logins wait for approval, or one was denied a moment ago.
    case tooManyRequests
    /// The account may not log in to this host.
    case hostNotAllowed
    /// This host's user of the login name is not the account's own (another uid), and the account may not be the
    /// hosts' local users.
    case localUserMismatch
    /// An administrator locked the account.
    case accountLocked
    /// The code typed is not the one the host shows.
    case wrongConfirmationCode
    /// This machine has not joined the manager as a host.
    case hostNotJoined
    // This machine
    /// A config or key file that someone other than root could have written.
    case untrustedFile
    case stateUnavailable
    case deviceKeyFailure
    /// The finger did not match the user's enrolled ones.
    case biometricMismatch
    /// fprintd, its reader or the user's enrolled fingers are missing.
    case biometricUnavailable
    /// The user's enrolled fingers changed since the factor was added, so it no longer counts (Nevis's
    /// keyDisappearedPermanently); add it again.
    case biometricInvalidated
    /// The TPM is missing, busy or in dictionary-attack lockout; trying later may work.
    case tpmUnavailable
    case identityManagerNotFound
}

extension XignSdkErrorCode {
    /// Nothing the manager said was read: it was not reached, not in time, or not over a transport the policy allows.
    /// A login then fails by its fail mode, and a personalization or a join fails as a whole.
    public var isTransportFailure: Bool {
        switch self {
        case .insecureTransport, .managerUnreachable, .transportFailure, .timeout, .tlsFailure: true
        default: false
        }
    }

    /// The manager cannot serve the request now, whether it said so (busy) or was not heard: a login ends by its fail
    /// mode. Only the second kind may lead offline.
    public var leavesTheManagerUnavailable: Bool { isTransportFailure || self == .managerBusy }
}

/// The one error type the SDK throws, so a front end needs one `catch` to tell the user what happened and what to do.
/// A struct with a code, not a class hierarchy: a caller switches on `errorCode`, and what only some codes carry (the
/// lock, the fields a registration got wrong) is a field.
public struct XignSdkError: Error, CustomStringConvertible, Sendable {
    public let errorCode: XignSdkErrorCode
    public let message: String
    /// `lockedOut`: the lock already in force, raised before any PIN is asked since the attempt cannot count.
    public let lockout: LockoutAttemptInformation?
    /// `managerRejectedRequest` of a registration: what the manager found wrong, field by field.
    let rejection: RegistrationRejection?

    public init(_ errorCode: XignSdkErrorCode, _ message: String) {
        (self.errorCode, self.message, lockout, rejection) = (errorCode, message, nil, nil)
    }

    public init(lockedOut information: LockoutAttemptInformation) {
        errorCode = .lockedOut
        message =
            information.isPermanent
            ? "this activation is locked permanently after too many wrong PINs; ask your administrator to unlock it (xign-manager admin unlock), or register again with `xign-setup register`"
            : "this activation is locked until \(information.lockedUntil.localDescription); try again after that time"
        (lockout, rejection) = (information, nil)
    }

    init(rejected rejection: RegistrationRejection, _ message: String) {
        (errorCode, self.message, lockout, self.rejection) = (.managerRejectedRequest, message, nil, rejection)
    }

    public var description: String { message }
}

/// A lock on an activation after too many wrong PINs: the one a wrong PIN just caused (a result), or one already in
/// force (`XignSdkError.lockout`). `lockedUntil` is on this host's clock: the manager says how long the lock holds,
/// and the wait is counted from when its answer arrived.
public struct LockoutAttemptInformation: Codable, Sendable, Equatable {
    public let isPermanent: Bool
    public let lockedUntil: Date
    public let failedAttempts: Int

    public init(isPermanent: Bool, lockedUntil: Date, failedAttempts: Int) {
        self.isPermanent = isPermanent
        self.lockedUntil = lockedUntil
        self.failedAttempts = failedAttempts
    }

    init(_ message: LockoutMessage, receivedAt: Date = Date()) {
        isPermanent = message.isPermanent
        lockedUntil = receivedAt.addingTimeInterval(Double(message.remainingMilliseconds) / 1000)
        failedAttempts = message.failedAttempts
    }
}

extension Date {
    init(millisecondsSince1970 ms: Int64) { self.init(timeIntervalSince1970: Double(ms) / 1000) }

    var millisecondsSince1970: Int64 { Int64((timeIntervalSince1970 * 1000).rounded()) }

    /// "2026-11-21 14:05:09 CET": local time, as a user reading a lockout message expects.
    public var localDescription: String {
        var seconds = time_t(timeIntervalSince1970.rounded(.up))
        var parts = tm()
        localtime_r(&seconds, &parts)
        var buffer = [CChar](repeating: 0, count: 64)
        let length = strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M:%S %Z", &parts)
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
