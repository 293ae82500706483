import FoundationEssentials
import XignCore
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// A login while the manager cannot be reached: this machine's TPM checks the PIN against the enrolment's offline
/// verifier, within the manager's grace and count of wrong PINs (docs/security.md, "Offline login"). The manager
/// learns of it, and charges the wrong PINs, at the next online login.
struct OfflineLogin {
    let login: Login
    let sdk: XignSdk
    let enrolment: IdentityManagerEntity
    /// The PAM service, for the report the manager audits.
    let service: String
    /// The role the login asks for: offline login checks only the PIN, so a role that needs more is refused.
    let role: String

    /// nil when offline login is not offered for this login: it then ends as an unreachable manager does.
    func run(unreachable error: XignSdkError) throws -> LoginOutcome? {
        // su or sudo that a user started: that user can stop the program past the timeout or take its descriptors,
        // and so choose "unreachable" (docs/security.md, G4).
        if login.caller.inSetuidHost && getuid() != 0 {
            login.debug("offline login not offered inside a setuid program that a user started")
            return nil
        }
        let offline = sdk.offlineLogins
        let availability = try offline.availability(of: enrolment, role: role)
        switch availability {
        case .notOffered(let why):
            login.debug("offline login \(why)")
            return nil
        case .available:
            break
        default:
            // The details, dates included, go to the log; whoever sits here learns none before the PIN.
            login.log(LOG_WARNING, "manager unreachable (\(error.message)); offline login \(availability)")
            login.tell(
                "XignIn: the identity manager cannot be reached, and offline login \(availability.beforeAuthentication).",
                isError: true)
            return login.options.failMode == .safe ? .ignored(.managerUnreachable) : .unavailable(.manager)
        }
        // A lock the manager signed still holds offline: the TPM is not asked while it lasts.
        if let lock = try sdk.store.pendingLockout(activationId: enrolment.activationId) {
            login.tellLocked(lock)
            return .locked(lock)
        }
        login.log(LOG_NOTICE, "manager unreachable (\(error.message)); offline login with the TPM")
        login.tell(
            "XignIn: the identity manager cannot be reached; this machine's TPM checks your PIN (offline login).",
            isError: false)
        let alias = DisplayText.sanitized(enrolment.alias, keepingLineFeeds: false)
        let pin = try login.ask(login.options.prompt.replacing("%a", with: alias), echo: false)
        guard !pin.isEmpty else { return .refused(.noPIN) }
        switch try offline.check(pin: pin, of: enrolment, service: service, role: role) {
        case .accepted(let until):
            let days = max(0, Int(until.timeIntervalSinceNow / 86_400))
            login.tell(
                "XignIn: logged in offline. Offline login is possible until \(until.localDescription) (\(days) day(s)); connect to the network before then.",
                isError: false)
            return .signedInOffline
        case .wrong(let left):
            login.tell(
                left == 0
                    ? "Wrong PIN. Offline login has ended; connect to the network and log in once."
                    : "Wrong PIN. \(left) more wrong PIN(s) end offline login until you log in online.", isError: true)
            return .wrongOfflinePIN(wrongPINsLeft: left)
        case .unavailable(let availability):
            // Another login used the last attempt meanwhile, or the TPM's clock ended the grace.
            login.log(LOG_WARNING, "offline login \(availability)")
            login.tell("XignIn: offline login \(availability.beforeAuthentication).", isError: true)
            return .unavailable(.manager)
        }
    }
}
