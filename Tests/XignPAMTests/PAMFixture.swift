import Foundation
import Testing
import XignCore
import XignDevice
import XignProtocol
import XignTestSupport

/// A real manager, a user personalized on this "machine", and pam.d service files that load the built pam_xign.so.
final class PAMFixture: @unchecked Sendable {
    let manager: ManagerProcess
    let directory = TemporaryDirectory()
    var state: String { directory.file("state") }
    var confdir: String { directory.file("pam.d") }
    private(set) var configPath: String

    static let repository: String = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.path + "/Package.swift") { return url.path }
        }
        return FileManager.default.currentDirectoryPath
    }()

    static var module: String {
        get throws {
            let path = repository + "/.build-pam/pam_xign.so"
            guard FileManager.default.fileExists(atPath: path) else {
                throw TestFailure("\(path) is not built; run `make pam` (make test does)")
            }
            return path
        }
    }

    /// The libpam harness, compiled once per test run; in /tmp itself, so that other users may run it.
    static let harness: Result<String, any Error> = Result {
        let directory = TemporaryDirectory()
        let output = "/tmp/xign-pam-harness-\(getpid())"
        RunEnd.remove(output)
        let result = try ChildProcess(
            "/usr/bin/cc", ["-O2", "-o", output, repository + "/pam/tests/pam_harness.c", "-lpam"], in: directory
        ).wait()
        guard result.status == 0 else { throw TestFailure("cannot build the PAM harness: \(result.stderr)") }
        return output
    }

    /// The simulator behind TPM keys, when the fixture uses them.
    let tpm: SoftwareTPM?
    /// logind's records of this test alone, and the scopes a login's process runs in (no logind runs here).
    let logind: RecordedLogind
    /// What xign.conf says, for SDKs a test makes.
    let configuration: ClientConfiguration

    /// `caFile`: the CA the machine trusts for an https manager (`ca_file` in xign.conf).
    init(
        managerConfig: String = ManagerProcess.testConfig, database: TestDatabase = .sqlite,
        users: [String] = ["alice"], tpm: SoftwareTPM? = nil,
        caFile: String? = nil, fingerprints: FingerprintDaemon? = nil, fingerSeconds: Int = 5,
        servingBrowsers: Bool = false,
        tpmLockout: TPMLockoutPolicy = .take
    ) throws {
        manager =
            servingBrowsers
            ? try ManagerProcess.servingBrowsers(config: managerConfig, database: database)
            : try ManagerProcess(config: managerConfig, database: database)
        self.tpm = tpm
        logind = try RecordedLogind()
        let state = directory.file("state")
        var configuration = ClientConfiguration()
        configuration.stateDirectory = state
        configuration.deviceKey = .software
        configuration.http.caFile = caFile
        var keyLines = caFile.map { "ca_file = \($0)\n" } ?? ""
        if let tpm {
            configuration.deviceKey = .tpm
            configuration.tcti = tpm.tcti
            configuration.tpmLockout = tpmLockout
            keyLines += "device_key = tpm\ntcti = \(tpm.tcti)\ntpm_lockout = \(tpmLockout.rawValue)\n"
        }
        if let fingerprints {
            configuration.fingerprintReader = fingerprints.reader()
            keyLines +=
                "fprintd_bus = \(fingerprints.busAddress)\nfingerprint_timeout = \(fingerSeconds)s\nfprintd_prints = \(fingerprints.printsDirectory)\n"
        }
        self.configuration = configuration
        configPath = ""
        baseConfig = "state_dir = \(state)\n" + keyLines
        for user in users { try enrol(localUser: user, email: "\(user)@example.org") }
        configPath = try directory.write("xign.conf", "")
        try writeConfig()
        try FileManager.default.createDirectory(atPath: confdir, withIntermediateDirectories: true)
        for name in ["login", "sudo"] { try service(name, arguments: "timeout=3") }
    }

    /// xign.conf before its [pam] section.
    private var baseConfig = ""

    /// Writes xign.conf: the fixture's settings, the session records of this test alone (so whether the test runner's
    /// own session is remote, as over SSH, changes nothing), and `pam` lines for the [pam] section.
    /// `top` adds settings outside any section, such as ca_file; they stay for later writes.
    func writeConfig(utmp: String? = nil, pam: String = "", top: String = "") throws {
        baseConfig += top
        let records = "logind_sessions = \(logind.sessionsDirectory)\nutmp = \(utmp ?? directory.file("no-utmp"))\n"
        try writeTestFile(configPath, Data((baseConfig + "[pam]\n" + records + pam).utf8))
    }

    /// A greeter's fixture whose login role asks for a finger: nobody is enrolled and has added "nobody-right", which
    /// fprintd knows, as a factor. The module waits 30 s for the finger, time to photograph and read its cue on a busy
    /// machine before the test touches the reader.
    static func greeterWithFinger() throws -> (PAMFixture, FingerprintDaemon) {
        let reader = try FingerprintDaemon()
        let config = ManagerProcess.testConfig(
            pamService: "roles = login", "role.login.authenticators = device+pin+biometric")
        let fixture = try PAMFixture(managerConfig: config, users: ["nobody"], fingerprints: reader, fingerSeconds: 30)
        try reader.enrol(user: "nobody", finger: "nobody-right")
        try fixture.addFingerFactor(user: "nobody", finger: "nobody-right", reader: reader)
        return (fixture, reader)
    }

    /// `xign-setup add-factor biometric` for `user`, whose `finger` fprintd knows: the PIN, then the finger on `reader`.
    func addFingerFactor(user: String, finger: String, reader: FingerprintDaemon) throws {
        let sdk = try XignSdk(configuration: configuration, localUser: user)
        guard let id = try sdk.store.list().first?.idmIdentifier else { throw TestFailure("\(user) has no enrolment") }
        let request = try sdk.authenticator.startApiAccessSynchronous(.addFactor, idmIdentifier: id)
        guard
            case .apiAccessAddFactor(let add) = try sdk.authenticator.finishApiAccessSynchronous(
                userInfo: try sdk.authenticator.signWithDeviceAndPinSynchronous(
                    request: request, pin: { "24680" }, incomplete: XignSdkError(.parametersIncomplete, "attributes")))
        else {
            throw TestFailure("expected apiAccessAddFactor")
        }
        reader.scanLater(finger)
        _ = try sdk.personalizer().finishAddBiometricFactor(request: add) { _ in }
    }

    /// Makes the machine whose state is `stateDirectory` (this fixture's unless given) a host named `name` at this
    /// fixture's manager, as `hosts add` and `xign-setup host join` do.
    func joinAsHost(_ name: String = "web1.example.org", groups: [String] = [], stateDirectory: String? = nil) throws {
        let added = try manager.admin(["hosts", "add", name] + groups.flatMap { ["--group", $0] })
        var host = ClientConfiguration()
        host.stateDirectory = stateDirectory ?? state
        _ = try XignSdk(configuration: host, localUser: "root")
            .joinHost(
                managerURL: manager.url,
                token: try HostJoinToken(parsing: String(added.stdout.split(separator: " ").last ?? "")))
    }

    /// Registers `email` and personalizes this machine for `localUser`, with `pin`; through `url` (a front end that
    /// trusts `caFile`) instead of the manager's own address when given.
    func enrol(
        localUser user: String, email: String, pin: String = "24680", via url: ManagerURL? = nil, caFile: String? = nil
    ) throws {
        var configuration = configuration
        configuration.http.caFile = caFile ?? configuration.http.caFile
        let sdk = try XignSdk(configuration: configuration, localUser: user)
        let parameters = try sdk.registry.initializationSynchronous(url: url ?? manager.url)
        parameters.pinSpec.setPin(pin)
        parameters.selection?.info.email?.setValue(value: email)
        parameters.setAlias("\(user)'s laptop")
        _ = try sdk.registry.registerSynchronous(data: parameters)
        let data = try PersonalizationInitializationData(parsing: manager.activationLink(for: email))
        guard
            case .newPersonalization(let personalization) = try sdk.personalizer(managerURLOverride: url)
                .decryptPersonalizationInitializationDataSynchronous(
                    data: data, pin: pin)
        else {
            throw TestFailure("expected newPersonalization")
        }
        _ = try sdk.personalizer(managerURLOverride: url).personalizeIdentityManagerSynchronous(
            parameters: personalization)
    }

    /// The module the service files load; a copy in the fixture's directory once hosts without root use it.
    private var servicesModule: String?

    /// Writes pam.d/NAME with the module's auth line, and `then` after it.
    func service(_ name: String, arguments: String, then: String = "") throws {
        let module = try servicesModule ?? Self.module
        _ = try directory.write(
            "pam.d/\(name)", "auth required \(module) config=\(configPath) \(arguments)\n\(then)\n", mode: 0o644)
    }

    /// A fixture for a screen locker: `user` (nobody) is enrolled, runs `service` and reaches the key through its own
    /// xignd.
    static func locker(service: String, user: String = "nobody") throws -> (PAMFixture, DaemonProcess) {
        let fixture = try PAMFixture(users: [user])
        try fixture.allowHostsWithoutRoot()
        let daemon = try DaemonProcess(configPath: fixture.configPath, directory: fixture.directory)
        try fixture.service(service, arguments: "socket=\(daemon.socketPath)")
        return (fixture, daemon)
    }

    /// A laptop whose manager is gone after one online login of `user`: its TPM (counting every wrong PIN) checks the PIN.
    static func offlineLaptop(user: String = "nobody") throws -> (PAMFixture, SoftwareTPM) {
        let tpm = try SoftwareTPM()
        try tpm.countFailuresStrictly()
        let fixture = try PAMFixture(users: [user], tpm: tpm)
        let online = try fixture.login(user)
        guard online.code == PAMCode.success else { throw TestFailure("the online login failed: \(online.output)") }
        fixture.manager.stop()
        return (fixture, tpm)
    }

    /// A locker's fixture on an offline laptop: the TPM checks the PIN, through xignd.
    static func offlineLocker(
        service: String, user: String = "nobody"
    ) throws -> (
        PAMFixture, DaemonProcess, SoftwareTPM
    ) {
        let (fixture, tpm) = try offlineLaptop(user: user)
        try fixture.allowHostsWithoutRoot()
        let daemon = try DaemonProcess(configPath: fixture.configPath, directory: fixture.directory)
        try fixture.service(service, arguments: "socket=\(daemon.socketPath)")
        return (fixture, daemon, tpm)
    }

    /// A locker's fixture whose manager stalls: the module gives up after 3 s and `failmode` decides; with safe,
    /// pam_permit stands in for the password line after it.
    static func stalledLocker(
        service: String, failmode: String, user: String = "nobody"
    ) throws -> (
        PAMFixture, DaemonProcess, FaultyServer
    ) {
        let (fixture, daemon) = try locker(service: service, user: user)
        let stalled = try FaultyServer.delaying(60, to: fixture.manager.port)
        try fixture.redirectEnrolments(to: stalled.url)
        try fixture.service(
            service, arguments: "socket=\(daemon.socketPath) timeout=3 failmode=\(failmode)",
            then: failmode == "safe" ? "auth required pam_permit.so" : "")
        return (fixture, daemon, stalled)
    }

    /// Points the stored enrolments from the manager at `old` (the fixture's) to `url`, such as a stand-in in front of it.
    func redirectEnrolments(to url: String, from old: String? = nil) throws {
        let path = state + "/identity-managers.json"
        let stored = try String(contentsOfFile: path, encoding: .utf8)
        try writeTestFile(path, Data(stored.replacingOccurrences(of: old ?? manager.url.description, with: url).utf8))
    }

    /// Lets a host that runs as another user (nobody) reach the service files and the module: the directory
    /// becomes traversable and the module is copied into it (the checkout may sit in root's home). The state
    /// stays root's alone, as on a real machine.
    func allowHostsWithoutRoot() throws {
        guard chmod(directory.path, 0o711) == 0 else {
            throw TestFailure("cannot open \(directory.path) to other users")
        }
        servicesModule = try copyForOtherUsers(try Self.module)
    }

    /// A copy of `path` in the fixture's directory that other users may read and run.
    func copyForOtherUsers(_ path: String) throws -> String {
        let copy = directory.file(URL(fileURLWithPath: path).lastPathComponent)
        try writeTestFile(copy, try Data(contentsOf: URL(fileURLWithPath: path)), mode: 0o755)
        return copy
    }

    struct Login {
        let code: Int
        /// The conversation, one "[STYLE] text" line per message, times replaced by <TIME>.
        let conversation: String
        let threadsBefore: Int
        let threadsAfter: Int
        let output: String
        /// What the module and the libraries it calls wrote to the host's stderr (a terminal under login).
        let errors: String
    }

    /// Runs pam_authenticate for `user` through `service`, answering prompts with `answers`, each of which a prompt
    /// must take (a login that asks less than the test scripted fails it, unless `unusedAnswersAllowed` says why a race
    /// decides how many are asked). `wrapper` runs the
    /// host (`harness`, the libpam harness unless given) inside another command, with `environment` if given.
    /// `items` sets PAM items first, such as "rhost=203.0.113.9" or "tty=/dev/pts/7".
    func login(
        _ user: String = "alice", service: String = "login", answers: [String] = ["24680"], wrapper: [String] = [],
        harness: String? = nil, environment: [String: String]? = nil, items: [String] = [],
        unusedAnswersAllowed: Bool = false,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> Login {
        try finish(
            try startLogin(
                user, service: service, answers: answers, wrapper: wrapper, harness: harness, environment: environment,
                items: items),
            unusedAnswersAllowed: unusedAnswersAllowed, sourceLocation: sourceLocation)
    }

    /// Starts a login without waiting for it; its conversation can be read while the module waits.
    func startLogin(
        _ user: String = "alice", service: String = "login", answers: [String] = ["24680"], wrapper: [String] = [],
        harness: String? = nil, environment: [String: String]? = nil, items: [String] = []
    ) throws -> ChildProcess {
        let host = try harness ?? Self.harness.get()
        // `login` runs on a virtual terminal unless the test says where: the console, as getty starts it.
        let items = service == "login" && !items.contains { $0.hasPrefix("tty=") } ? items + ["tty=tty1"] : items
        let command = wrapper + [host, confdir, service, user] + (items.isEmpty ? [] : ["1"] + items)
        return try ChildProcess(
            command[0], Array(command.dropFirst()), stdin: answers.map { $0 + "\n" }.joined(), environment: environment,
            in: directory)
    }

    /// Waits for a started login and reads what it printed.
    func finish(
        _ child: ChildProcess, timeout: Double = 60, unusedAnswersAllowed: Bool = false,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> Login {
        let result = try child.wait(timeout: timeout)
        guard result.status == 0 else { throw TestFailure("harness failed (\(result.status)): \(result.stderr)") }
        let lines = result.stdout.split(separator: "\n").map(String.init)
        func number(_ key: String) -> Int {
            for line in lines {
                for field in line.split(separator: " ") where field.hasPrefix(key + "=") {
                    return Int(field.dropFirst(key.count + 1)) ?? -1
                }
            }
            return -1
        }
        let conversation = lines.filter { $0.hasPrefix("[") }.map {
            $0.replacingOccurrences(
                of: #"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [A-Za-z0-9+:-]+"#, with: "<TIME>", options: .regularExpression)
        }.joined(separator: "\n")
        if number("unused_answers") > 0 && !unusedAnswersAllowed {
            Issue.record(
                "the login left \(number("unused_answers")) scripted answer(s) unused (result=\(number("result"))):\n\(conversation)",
                sourceLocation: sourceLocation)
        }
        return Login(
            code: number("result"), conversation: conversation, threadsBefore: number("threads_before"),
            threadsAfter: number("threads_after"),
            output: result.stdout, errors: result.stderr)
    }

    /// pamtester under pam_wrapper with this fixture's service files; `debugLevel` 3 shows what modules log.
    /// `asUser` runs it as that user (setpriv), as a screen locker runs: in that user's session at the seat, unless
    /// `session` names another prefix (`logind.inUserManager`, …) or none.
    func pamtester(
        _ arguments: [String], stdin: String, debugLevel: Int? = nil, asUser: String? = nil, session: [String]? = nil,
        environment extra: [String: String] = [:]
    ) throws -> ChildProcess.Result {
        var environment = ProcessInfo.processInfo.environment.merging(extra) { $1 }
        environment["LD_PRELOAD"] = "libpam_wrapper.so"
        environment["PAM_WRAPPER"] = "1"
        environment["PAM_WRAPPER_SERVICE_DIR"] = confdir
        environment["PAM_WRAPPER_DEBUGLEVEL"] = debugLevel.map(String.init)
        let inSession = try session ?? asUser.map { try atSeat($0) } ?? []
        let command = inSession + (asUser.map(Self.runAs) ?? []) + ["/usr/bin/pamtester"] + arguments
        return try ChildProcess(
            command[0], Array(command.dropFirst()), stdin: stdin, environment: environment, in: directory
        ).wait()
    }

    /// The prefix that runs a command in `user`'s session, the active one of seat0 (recorded once per user).
    func atSeat(_ user: String) throws -> [String] {
        let id = "seat\(user.filter { $0.isLetter || $0.isNumber })"
        if !logind.records(id) {
            try logind.addSession(id, user: user)
        }
        return try logind.inSession(id)
    }

    /// The prefix that runs a command as `user`, in that user's session at the seat: a desktop's program.
    func atSeat(as user: String) throws -> [String] { try atSeat(user) + Self.runAs(user) }

    /// The prefix that runs a command as `user` with that user's group and no others.
    static func runAs(_ user: String) -> [String] {
        [
            "/usr/bin/setpriv", "--reuid=\(user)", "--regid=\(user == "nobody" ? "nogroup" : user)", "--clear-groups",
            "--",
        ]
    }

    /// The golden conversation named `name`.
    static func golden(_ name: String) throws -> String {
        try String(contentsOfFile: repository + "/Tests/XignPAMTests/Golden/\(name).txt", encoding: .utf8)
            .trimmingCharacters(in: .newlines)
    }

    /// Logins the manager finished for `localUser`: a code was issued and redeemed for a token.
    func completedLogins(_ localUser: String) throws -> Int {
        let rows = try manager.query(
            "SELECT count(*) FROM authentications WHERE local_user = '\(localUser)' AND code_expires_at IS NOT NULL AND code IS NULL"
        )
        return rows.first.flatMap { Int($0) } ?? -1
    }

    func failedAttempts(_ email: String) throws -> Int { try activation(email)["failedAttempts"] as? Int ?? -1 }

    func activation(_ email: String) throws -> [String: Any] {
        let result = try manager.admin(["activations", "--json", "--email", email])
        let list = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]]
        guard let first = list?.first else { throw TestFailure("no activation for \(email): \(result.stderr)") }
        return first
    }
}

/// PAM return codes (security/_pam_types.h), by name, for readable expectations.
enum PAMCode {
    static let success = 0, serviceError = 3, authError = 7, authInfoUnavailable = 9, userUnknown = 10, maxTries = 11
    static let conversationError = 19
}

extension XignSdk {
    /// The change-PIN process as `xign-setup change-pin` runs it: device and old PIN, then the new PIN. Returns how many
    /// activations the new PIN now unlocks.
    func changePIN(of id: String, from old: String, to new: String) throws -> Int {
        guard
            case .apiAccessChangePin(let change) = try authenticator.finishApiAccessSynchronous(
                userInfo: try authenticator.signWithDeviceAndPinSynchronous(
                    request: try authenticator.startApiAccessSynchronous(.changePin, idmIdentifier: id), pin: { old },
                    incomplete: XignSdkError(.parametersIncomplete, "attributes not confirmed")))
        else { throw TestFailure("expected apiAccessChangePin") }
        guard change.pinSpec.setPin(new) == .valid else {
            throw TestFailure("the new PIN \(new) does not meet the policy")
        }
        return try personalizer().finishChangePin(request: change)
    }
}
