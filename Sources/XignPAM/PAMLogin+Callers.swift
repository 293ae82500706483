import CPAM
import FoundationEssentials
import XignCore

#if canImport(Glibc)
import Glibc
#endif

/// Who may use this machine's enrolment for a login: not a login over the network (LoginOrigin), and in a setuid
/// host only the caller's own.
extension PAMLogin {
    /// mode=local over the network: the machine's key is there whoever connects, so it is not used (LoginOrigin).
    func refuseRemote(because reason: String) -> (Int32, String) {
        if options.remote == .ignore {
            debug("not using this machine's device key: the login is remote (\(reason))")
            return (PAM_IGNORE, "remote-ignored")
        }
        log(LOG_WARNING, "refused this machine's device key: the login is remote (\(reason)); use mode=auto or mode=confirm for this service")
        tell(
            "XignIn: this machine's key is only for logins at this machine, and this login comes over the network. Log in another way, or ask your administrator.",
            isError: true)
        return (PAM_AUTH_ERR, "remote-refused")
    }

    enum SetuidCaller {
        /// Not a setuid host run by another user, or the caller's own enrolment.
        case free
        /// Another user's enrolment, which the configuration allows, within this limit.
        case limited(AttemptLimit, key: String)
        case refused((Int32, String))
    }

    /// In a setuid host that a user runs (su, sudo), the module is root with that user's choice of target: such a
    /// caller may use only the enrolment of its own real uid, as xignd rules, so nobody tests or locks another's PIN.
    /// With `setuid_other_users = yes` it may use another's, with xignd's attempt limit per caller and target.
    func checkSetuidCaller(_ configuration: ClientConfiguration) -> SetuidCaller {
        let uid = getuid()
        guard caller.inSetuidHost, uid != 0 else { return .free }
        let target = LocalUser(named: caller.user)
        if target?.uid == uid { return .free }
        guard configuration.setuidCallersMayUseOtherEnrolments, let target else {
            log(LOG_WARNING, "uid=\(uid) asked for \(caller.user)'s enrolment through \(caller.service ?? "a setuid program"): refused")
            tell("XignIn: here you can use only your own enrolment; \(caller.user) must log in as themselves.", isError: true)
            return .refused((PAM_AUTH_ERR, "other-user-refused"))
        }
        let limit = AttemptLimit(path: configuration.stateDirectory + "/setuid-attempts.json")
        let key = "\(uid)>\(target.uid)"
        switch Result(catching: { try limit.charge(key) }) {
        case .success(.allowed):
            return .limited(limit, key: key)
        case .success(.refused(let seconds)):
            log(LOG_WARNING, "uid=\(uid) asked for \(caller.user)'s enrolment: attempt limit reached")
            tell("XignIn: too many PIN attempts for \(caller.user) from your account; try again in \(seconds) s.", isError: true)
            return .refused((PAM_MAXTRIES, "attempt-limit"))
        case .failure(let error):
            log(LOG_ERR, "cannot record the attempt: \(error)")
            return .refused((PAM_SERVICE_ERR, "state-error"))
        }
    }
}
