import FoundationEssentials
import XignCore

#if canImport(Glibc)
import Glibc
#endif

/// Who may use this machine's enrolment for a login: not a login over the network (LoginOrigin), and in a setuid
/// host only the caller's own.
extension Login {
    /// mode=local over the network: the machine's key is there whoever connects, so it is not used (LoginOrigin).
    func refuseRemote(because reason: String) -> LoginOutcome {
        if options.remote == .ignore {
            debug("not using this machine's device key: the login is remote (\(reason))")
            return .ignored(.remoteLogin)
        }
        log(
            LOG_WARNING,
            "refused this machine's device key: the login is remote (\(reason)); use mode=auto or mode=confirm for this service"
        )
        tell(
            "XignIn: this machine's key is only for logins at this machine, and this login comes over the network. Log in another way, or ask your administrator.",
            isError: true)
        return .refused(.remoteLogin)
    }

    /// In a setuid host that a user runs (su, sudo), the module is root with that user's choice of target: such a
    /// caller may use only the enrolment of its own real uid, as xignd rules, so nobody tests or locks another's PIN.
    /// With `setuid_other_users = yes` it may use another's, with an attempt limit per caller and target, which a
    /// login that succeeds resets.
    func withSetuidAllowance(
        _ configuration: ClientConfiguration, _ body: () throws -> LoginOutcome
    ) throws -> LoginOutcome {
        let uid = getuid()
        guard caller.inSetuidHost, uid != 0 else { return try body() }
        let target = LocalUser(named: caller.user)
        if target?.uid == uid { return try body() }
        guard configuration.setuidCallersMayUseOtherEnrolments, let target else {
            log(
                LOG_WARNING,
                "uid=\(uid) asked for \(caller.user)'s enrolment through \(caller.service ?? "a setuid program"): refused"
            )
            tell(
                "XignIn: here you can use only your own enrolment; \(caller.user) must log in as themselves.",
                isError: true)
            return .refused(.otherUsersEnrolment)
        }
        let limit = AttemptLimit(path: configuration.stateDirectory + "/setuid-attempts.json")
        let key = "\(uid)>\(target.uid)"
        switch Result(catching: { try limit.charge(key) }) {
        case .success(.allowed):
            let outcome = try body()
            if outcome.isSuccess { try? limit.reset(key) }
            return outcome
        case .success(.refused(let seconds)):
            log(LOG_WARNING, "uid=\(uid) asked for \(caller.user)'s enrolment: attempt limit reached")
            tell(
                "XignIn: too many PIN attempts for \(caller.user) from your account; try again in \(seconds) s.",
                isError: true)
            return .attemptLimitReached
        case .failure(let error):
            log(LOG_ERR, "cannot record the attempt: \(error)")
            return .misconfigured(.state)
        }
    }
}
