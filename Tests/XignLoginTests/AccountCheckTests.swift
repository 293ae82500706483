import Foundation
import Testing
import XignLogin
import XignProtocol
import XignTestSupport

/// The account phase's decision where the manager cannot be asked (this machine joined no manager): what a host's
/// cache says, and for how long. AccountPhaseTests drive the same through sshd on a joined host with its manager.
@Suite struct AccountCheckTests {
    let directory = TemporaryDirectory()

    /// A cache serving `nina` (locked or not) that the manager last answered `age` seconds ago, a local passwd with
    /// `xigntest`, and an xign.conf whose `[directory]` lines are `settings`.
    func check(
        _ user: String = "nina", locked: Bool = false, age: Int64 = 0, settings: String = "",
        arguments: [String] = []
    ) throws -> (AccountCheck.Decision, [String], [String]) {
        let cache = directory.file("cache-\(UUID().uuidString)")
        try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: false)
        try writeTestFile(
            cache + "/passwd",
            Data("nina:\(locked ? "!" : "*"):2001000000:2001000000:Nina:/home/nina:/bin/bash\n".utf8), mode: 0o644)
        try writeTestFile(
            cache + "/answered-at", Data("\(Int64(Date().timeIntervalSince1970) - age)\n".utf8), mode: 0o644)
        let passwd = try directory.write(
            "passwd", "root:x:0:0:root:/root:/bin/bash\nxigntest:x:1000:1000::/home/xigntest:/bin/sh\n", mode: 0o644)
        let config = try directory.write(
            "xign.conf", "state_dir = \(directory.file("state"))\n[directory]\n\(settings)\n")
        let conversation = ScriptedConversation(answers: [])
        let lines = LogLines()
        let decision = AccountCheck(
            caller: LoginCaller(user: user, service: "sshd", ruser: nil, rhost: "192.0.2.7"),
            options: try LoginOptions(arguments: ["config=\(config)"] + arguments), conversation: conversation,
            log: { lines.append($1) }, cacheDirectory: cache, localPasswd: passwd
        ).run()
        return (decision, conversation.transcript, lines.all)
    }

    @Test func withinTheBoundTheCacheAdmitsAndPastItTheLoginWaitsForTheManager() throws {
        let (fresh, _, log) = try check(age: 60, settings: "offline_accounts = 1h")
        #expect(fresh == .allowed(cacheAgeSeconds: 60) || fresh == .allowed(cacheAgeSeconds: 61), "\(log)")
        #expect(log.last?.hasPrefix("account=allowed-from-cache") == true, "\(log)")

        let (stale, said, staleLog) = try check(age: 7200, settings: "offline_accounts = 1h")
        #expect(stale == .refused(.unchecked))
        #expect(said.first?.contains("cannot reach the identity manager") == true, "\(said)")
        #expect(staleLog.last == "account=refused reason=unchecked service=sshd user=nina rhost=192.0.2.7")
        // failmode=safe hands the stale case to the rest of the stack, and says nothing.
        let (safe, safeSaid, _) = try check(age: 7200, settings: "offline_accounts = 1h", arguments: ["failmode=safe"])
        #expect(safe == .ignored && safeSaid.isEmpty)
        // 0 never decides from the cache, however fresh.
        #expect(try check(age: 0, settings: "offline_accounts = 0").0 == .refused(.unchecked))
    }

    /// A host clock set back makes the last answer look young: one more than five minutes ahead counts as unknown.
    @Test func aLastAnswerFromTheFutureIsNoAnswer() throws {
        #expect(try check(age: -3600, settings: "offline_accounts = 1d").0 == .refused(.unchecked))
        #expect(
            try check(age: -60, settings: "offline_accounts = 1d").0 != .refused(.unchecked), "a clock a minute off")
    }

    @Test func aLockInTheCacheHoldsWhateverItsAge() throws {
        let (decision, said, _) = try check(locked: true, age: 0, settings: "offline_accounts = 1d")
        #expect(decision == .refused(.locked))
        #expect(said == ["[ERROR_MSG] XignIn: an administrator locked your account; ask them to unlock it."])
    }

    /// Local users and names the cache does not serve are not the module's to judge: not even a word in the log.
    @Test func localUsersAndUnservedNamesAreLeftToTheStack() throws {
        let (local, said, log) = try check("xigntest", age: 99_999, settings: "offline_accounts = 1h")
        #expect(local == .notServed && said.isEmpty && log.isEmpty)
        #expect(try check("zed", age: 99_999).0 == .notServed)
    }

    /// A cache that is not root's alone is no cache: a user who could write it could unlock themselves.
    @Test func aCacheOthersCanWriteServesNobody() throws {
        let cache = directory.file("writable")
        try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: false)
        try writeTestFile(
            cache + "/passwd", Data("nina:*:2001000000:2001000000::/home/nina:/bin/bash\n".utf8), mode: 0o666)
        #expect(DirectoryFiles.accounts(in: cache).isEmpty)
        chmod(cache + "/passwd", 0o644)
        #expect(DirectoryFiles.accounts(in: cache).map(\.name) == ["nina"], "the control: root's alone")
    }
}
