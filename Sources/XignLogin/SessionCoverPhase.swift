import FoundationEssentials
import XignCore
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// `pam_sm_open_session` and `pam_sm_close_session`: an SSH login the user approved opens a cover for its audit session
/// (pam_loginuid gave it one just before), where the host's policy lets any service pass on it; the session's close
/// ends it. Neither ever fails a session: what goes wrong is logged, and sudo then asks for a fresh approval.
public struct SessionCoverPhase {
    let caller: LoginCaller
    let options: LoginOptions
    let log: (_ priority: Int32, _ message: String) -> Void

    public init(
        caller: LoginCaller, options: LoginOptions, log: @escaping (_ priority: Int32, _ message: String) -> Void
    ) {
        self.caller = caller
        self.options = options
        self.log = log
    }

    /// Opens the cover of `approval` (the confirmation the auth phase passed on); whether one was opened.
    public func open(approval: String?) -> Bool {
        guard let approval, geteuid() == 0, DirectoryFiles.policies().values.contains(.session) else { return false }
        guard let session = SessionCoverRecords.currentAuditSession() else {
            log(
                LOG_WARNING,
                "no cover for \(caller.user)'s approved login: the session has no audit session id; put `session required pam_loginuid.so` before pam_xign in \(caller.service ?? "the service")'s stack"
            )
            return false
        }
        guard let user = LocalUser(named: caller.user) else { return false }
        do {
            let configuration = try options.clientConfiguration()
            let sdk = try XignSdk(configuration: configuration, localUser: caller.user)
            let cover = try sdk.openSessionCover(
                confirmationId: approval, loginName: caller.user, auditSession: session)
            try SessionCoverRecords(stateDirectory: configuration.stateDirectory).save(
                cover, user: caller.user, uid: user.uid)
            log(
                LOG_NOTICE,
                "approval \(approval) covers audit session \(session) of \(caller.user): cover \(cover.coverId)")
            return true
        } catch {
            log(LOG_WARNING, "no cover for \(caller.user)'s approved login: \(error)")
            return false
        }
    }

    /// Ends the cover of this session, if it has one; whether it had.
    public func close() -> Bool {
        guard geteuid() == 0, let session = SessionCoverRecords.currentAuditSession() else { return false }
        do {
            var configuration = try options.clientConfiguration()
            // sshd waits for the close before the connection ends: never long.
            configuration.http.timeoutMilliseconds = min(configuration.http.timeoutMilliseconds, 5_000)
            configuration.http.connectTimeoutMilliseconds = min(configuration.http.connectTimeoutMilliseconds, 2_000)
            let records = SessionCoverRecords(stateDirectory: configuration.stateDirectory)
            guard let record = records.record(of: session), UserName.same(record.user, caller.user) else {
                return false
            }
            records.remove(session)
            try XignSdk(configuration: configuration, localUser: caller.user).endSessionCover(record.cover)
            log(LOG_NOTICE, "cover \(record.cover.coverId) of audit session \(session) ended: the session closed")
        } catch {
            // The record is gone, so nothing on this host uses the cover; the manager lets it run out.
            log(LOG_WARNING, "the manager did not hear that audit session \(session) closed: \(error)")
        }
        return true
    }
}
