import ArgumentParser
import FoundationEssentials
import XignCore
import XignDevice
import XignLogin
import XignProtocol
import XignTerminal

#if canImport(Glibc)
import Glibc
#endif

/// xign-setup's exit statuses, as the README lists them; 0 is `.success`, 1 `.failure` and 64 `.validationFailure`.
extension ExitCode {
    /// The activation is locked after wrong PINs; the message says until when.
    static let lockedOut = ExitCode(2)
    /// The manager cannot be reached (or timed out, or TLS failed).
    static let managerUnreachable = ExitCode(3)
    /// The manager requires a stronger device key.
    static let securityInsufficient = ExitCode(4)
    /// The manager rejected the registration's attributes.
    static let registrationRejected = ExitCode(5)
}

/// A wrong PIN: says until when and what to do; the exit status is 2.
func reportLockout(_ lock: LockoutAttemptInformation, output: Output) -> ExitCode {
    let when = lock.isPermanent ? "permanently" : "until \(lock.lockedUntil.localDescription)"
    Terminal.write("Wrong PIN. The activation is locked \(when) (\(lock.failedAttempts) failed attempt(s)).\n")
    Terminal.write(
        lock.isPermanent
            ? "Register again with `xign-setup register`, or ask your administrator to unlock it.\n"
            : "Run the same command again after that time.\n")
    output.emit([
        "status": .string("lockout"), "isPermanent": .bool(lock.isPermanent),
        "lockedUntil": .string(lock.lockedUntil.iso8601), "failedAttempts": .int(lock.failedAttempts),
    ])
    return .lockedOut
}

/// Maps an error to a message on stderr and the documented exit status.
func exitCode(for error: any Error, json: Bool) -> ExitCode {
    let status: ExitCode
    var message = "\(error)"
    switch error {
    case let sdk as XignSdkError:
        switch sdk.errorCode {
        case .lockedOut:
            status = .lockedOut
            if json, let lock = sdk.lockout {
                Output(json: true).emit([
                    "status": .string("lockedOut"), "isPermanent": .bool(lock.isPermanent),
                    "lockedUntil": .string(lock.lockedUntil.iso8601),
                ])
            }
        case .securityInsufficient: status = .securityInsufficient
        // A URL the transport policy refuses is the user's to fix; trying again later does not help.
        case .insecureTransport: status = .failure
        default: status = sdk.errorCode.leavesTheManagerUnavailable ? .managerUnreachable : .failure
        }
        message = sdk.message
    default:
        status = .failure
    }
    Terminal.write("xign-setup: \(message)\n")
    return status
}
