import FoundationEssentials
import XignCore
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// `pam_sm_acct_mgmt`: whether a person this host serves from the manager's directory may come in now, whatever
/// proved them (an SSH key, GSSAPI, a confirmation, a PIN, root's `su`). The manager is asked for that one account at
/// each login, so a lock or a removal holds at the next login on every host; while it cannot be asked, the cache
/// decides, within `[directory] offline_accounts` of the manager's last answer. Local users, and every name the cache
/// does not serve, are not the module's to judge (docs/design.md, "The account phase").
public struct AccountCheck {
    public enum Decision: Equatable {
        /// Not a user the manager serves here: the rest of the stack decides.
        case notServed
        /// The manager let the user in now, or (`cacheAgeSeconds`) the cache did while the manager was out of reach.
        case allowed(cacheAgeSeconds: Int64?)
        case refused(Refusal)
        /// The manager was out of reach past the bound, and `failmode=safe` leaves it to the rest of the stack.
        case ignored
        case misconfigured
    }

    public enum Refusal: String, Equatable {
        case locked
        /// Removed at the manager, or its host groups leave this host out.
        case notOnThisHost = "not-on-this-host"
        /// The manager could not be asked, and the cache is older than the bound.
        case unchecked
        /// The manager's answer could not be trusted or read.
        case failed
    }

    let caller: LoginCaller
    let options: LoginOptions
    let dialogue: LoginDialogue
    let log: (_ priority: Int32, _ message: String) -> Void
    /// The host's directory cache; another only in tests of the decision itself.
    let cacheDirectory: String
    let localPasswd: String

    public init(
        caller: LoginCaller, options: LoginOptions, conversation: any Conversation,
        log: @escaping (_ priority: Int32, _ message: String) -> Void,
        cacheDirectory: String = DirectoryFiles.directory, localPasswd: String = "/etc/passwd"
    ) {
        self.caller = caller
        self.options = options
        self.dialogue = LoginDialogue(conversation: conversation, service: caller.service, silent: options.silent)
        self.log = log
        self.cacheDirectory = cacheDirectory
        self.localPasswd = localPasswd
    }

    /// Decides, and logs one line for a user the manager serves here.
    public func run() -> Decision {
        let decision = decide()
        guard decision != .notServed else { return decision }
        let word =
            switch decision {
            case .allowed(nil): "allowed"
            case .allowed(let age?): "allowed-from-cache age=\(age)s"
            case .refused(let refusal): "refused reason=\(refusal.rawValue)"
            case .ignored: "ignored reason=unchecked"
            case .misconfigured, .notServed: "misconfigured"
            }
        func field(_ value: String?) -> String { value.map { LogText.field($0, maximumLength: 128) } ?? "-" }
        log(
            decision == .allowed(cacheAgeSeconds: nil) ? LOG_INFO : LOG_NOTICE,
            "account=\(word) service=\(field(caller.service)) user=\(field(caller.user)) rhost=\(field(caller.rhost))")
        return decision
    }

    private func decide() -> Decision {
        guard let entry = DirectoryFiles.accounts(in: cacheDirectory).first(where: { $0.name == caller.user }),
            !isLocalUser()
        else { return .notServed }
        // Without root (a screen locker) neither the host key nor the manager is in reach: the cache's lock decides.
        guard geteuid() == 0 else { return entry.locked ? refuse(.locked) : .allowed(cacheAgeSeconds: cacheAge()) }
        let configuration: ClientConfiguration
        do { configuration = try options.clientConfiguration() } catch {
            log(LOG_ERR, "configuration error: \(error)")
            return .misconfigured
        }
        do {
            let sdk = try XignSdk(configuration: configuration, localUser: caller.user)
            let answer = try sdk.fetchHostDirectory(.name(caller.user))
            let user = answer.users.first(where: { $0.loginName == caller.user })
            if user?.locked != entry.locked { askXigndToRecheck() }
            guard let user else { return refuse(.notOnThisHost) }
            return user.locked ? refuse(.locked) : .allowed(cacheAgeSeconds: nil)
        } catch let error as XignSdkError
            where error.errorCode.leavesTheManagerUnavailable || error.errorCode == .hostNotJoined
        {
            log(LOG_WARNING, "the manager cannot be asked about \(caller.user): \(error.message)")
            return fromCache(entry, bound: configuration.offlineAccountsMilliseconds / 1000)
        } catch {
            log(LOG_ERR, "the manager's answer about \(caller.user) cannot be used: \(error)")
            return refuse(.failed)
        }
    }

    /// The cache's word while the manager is out of reach: its lock always, its admission within `bound` seconds of
    /// the manager's last answer. A last answer more than five minutes ahead of this clock counts as unknown.
    private func fromCache(_ entry: DirectoryFiles.Entry, bound: Int64) -> Decision {
        if entry.locked { return refuse(.locked) }
        if let age = cacheAge(), age >= -300, age <= bound, bound > 0 { return .allowed(cacheAgeSeconds: age) }
        if options.failMode == .safe { return .ignored }
        return refuse(.unchecked)
    }

    /// The manager's word differs from the cache's: xignd takes it now, so a lock drops the local groups here at once
    /// (other hosts at their next refresh). Best effort, within a second: the decision does not wait on it.
    private func askXigndToRecheck() {
        do {
            let deadline = MonotonicClock.Instant.deadline(in: 1_000)
            let connection = try DaemonConnection.connect(
                path: cacheDirectory + "/" + DirectoryFiles.socket, timeoutMilliseconds: 1_000)
            try connection.write(DirectoryQuery.recheck(caller.user).encoded, until: deadline)
            _ = try connection.read(DirectoryQuery.headerLength, until: deadline)
        } catch {
            log(LOG_NOTICE, "xignd could not be asked to take the manager's word about \(caller.user): \(error)")
        }
    }

    private func cacheAge() -> Int64? {
        DirectoryFiles.answeredAt(in: cacheDirectory).map { Int64(Date().timeIntervalSince1970) - $0 }
    }

    private func refuse(_ refusal: Refusal) -> Decision {
        let text =
            switch refusal {
            case .locked: "XignIn: an administrator locked your account; ask them to unlock it."
            case .notOnThisHost:
                "XignIn: your account may no longer log in to this host (it was removed, or its host groups leave this host out); ask your administrator."
            case .unchecked:
                "XignIn: this host cannot reach the identity manager to check your account, and its copy is too old to decide alone; try again when the manager is back, or ask your administrator."
            case .failed:
                "XignIn: this host cannot check your account with the identity manager; ask your administrator."
            }
        // Never a prompt here: sshd's account phase after a key has nobody to answer one (it fails the conversation).
        if !dialogue.silent { try? dialogue.show(text, isError: true) }
        return .refused(refusal)
    }

    /// A user of the host's own files: local users win, even one added after xignd wrote its cache.
    private func isLocalUser() -> Bool {
        guard let data = try? AtomicFile.read(localPasswd, limit: 8 << 20) else { return false }
        return DirectoryFiles.entries(in: String(decoding: data, as: UTF8.self)).contains { $0.name == caller.user }
    }
}
