import FoundationEssentials
import XignCore
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// A sudo (or su: a setuid host a user ran) in a session an approved SSH login opened, where the host's policy for the
/// service is `session`: it passes on that approval's cover while the manager says the cover holds, and is audited
/// there as the login it stands for. Anything else (another audit session, another user, an ended cover) is not
/// covered, and the login asks for a fresh approval.
struct CoverLogin {
    let login: Login
    let sdk: XignSdk
    let records: SessionCoverRecords

    init(login: Login, sdk: XignSdk, stateDirectory: String) {
        self.login = login
        self.sdk = sdk
        self.records = SessionCoverRecords(stateDirectory: stateDirectory)
    }

    /// `.covered`, or nil where no cover holds for this login.
    func run() throws -> LoginOutcome? {
        let caller = login.caller
        guard caller.inSetuidHost, SudoPolicy.of(caller.service, in: DirectoryFiles.policies()) == .session,
            let session = SessionCoverRecords.currentAuditSession(), let record = records.record(of: session),
            UserName.same(record.user, caller.user), record.uid == getuid()
        else { return nil }
        do {
            _ = try sdk.useSessionCover(record.cover, service: caller.service ?? "pam")
        } catch let error as XignSdkError
            where !error.errorCode.leavesTheManagerUnavailable && error.errorCode != .accountLocked
        {
            login.log(LOG_NOTICE, "the cover of audit session \(session) does not hold: \(error.message)")
            records.remove(session)
            return nil
        }
        login.debug("covered by approval \(record.cover.confirmationId) (cover \(record.cover.coverId))")
        return .covered
    }
}
