import FoundationEssentials
import XignDevice
import XignProtocol

/// /etc/xign/xign.conf: settings for xign-setup and the PAM module. Never read from the environment.
public struct ClientConfiguration: Sendable, Equatable {
    public static let defaultPath = "/etc/xign/xign.conf"

    public var stateDirectory = "/var/lib/xign"
    /// The manager `xign-setup register` uses when none is given.
    public var managerURL: ManagerURL?
    public var http = HTTPClient.Configuration()
    /// The TPM when one works, else a software key with a warning.
    public var deviceKey = DeviceKeyPreference.auto
    /// How to reach the TPM. Always named: libtss2 given no TCTI quietly tries a simulator on localhost:2321.
    public var tcti = "device:/dev/tpmrm0"
    /// The manager's service that PAM logins authenticate to.
    public var pamService = "pam"
    /// The role a PAM service asks for; services not listed use `pamDefaultRole`.
    public var pamRoles = ["sudo": "sudo"]
    public var pamDefaultRole = "login"
    /// fprintd, for roles that ask for the biometric factor.
    public var fingerprintReader = FingerprintReader()
    /// Where the host records its sessions, to tell a login at this machine from one over the network.
    public var sessionRecords = SessionRecords()
    /// Whether a host confirms logins to system accounts (root, uids below UID_MIN); no by default.
    public var confirmsSystemAccounts = false
    /// Whether a user running a setuid program (su) may use another user's enrolment, within an attempt limit per
    /// caller and target; no by default.
    public var setuidCallersMayUseOtherEnrolments = false
    /// Whether a login may check the PIN with the TPM while the manager cannot be reached, as far as the manager allows.
    public var offline = OfflineMode.auto
    /// Whether xign may set the TPM's lockout authorization, which offline login needs out of root's reach.
    public var tpmLockout = TPMLockoutPolicy.leave
    /// The local groups the manager's accounts may join on this host (`[directory] local_groups`): the manager names
    /// them, the host grants only these (docs/security.md, H5).
    public var grantedLocalGroups: Set<String> = ["sudo"]
    /// How long a joined host serves its cached directory after it last heard from the manager (`[directory] keep`):
    /// removed accounts and a removed host end there even if the manager is never reached again.
    public var directoryKeepMilliseconds: Int64 = 7 * 86_400_000
    /// How long after the manager last answered the account phase still admits, from the cache, the users the
    /// manager serves here while it cannot ask (`[directory] offline_accounts`; 0: never).
    public var offlineAccountsMilliseconds: Int64 = 86_400_000

    /// `offline`: `auto` (as the manager's policy allows, with a TPM key) or `never`.
    public enum OfflineMode: String, Sendable, CaseIterable {
        case auto, never
    }

    /// Where this host records sessions (logind, utmp): how the login tells a local session from a remote one.
    public struct SessionRecords: Sendable, Equatable {
        public var utmpPath = "/var/run/utmp"
        public var logindSessionsDirectory = "/run/systemd/sessions"
        /// Where processes are: `/proc`, apart only for tests of recorded data.
        public var processDirectory = "/proc"
        /// logind's users, beside its sessions.
        public var logindUsersDirectory: String {
            let parent = logindSessionsDirectory.split(separator: "/").dropLast().joined(separator: "/")
            return "/\(parent)/users"
        }
        public init() {}
    }

    /// The role for a PAM service name (sudo, login, gdm-password, sshd, …).
    public func role(forPAMService service: String?) -> String {
        service.flatMap { pamRoles[$0] } ?? pamDefaultRole
    }

    /// `device_key`: `tpm` (required), `software` (the explicit fallback), or `auto` (a TPM key where the machine has one).
    public enum DeviceKeyPreference: String, Sendable, CaseIterable {
        case tpm, software, auto
    }

    public init() {}

    public init(file: ConfigFile) throws {
        let fail = file.fail
        try file.rejectUnknownKeys(
            [
                "state_dir", "manager_url", "ca_file", "proxy", "timeout", "connect_timeout", "device_key", "tcti",
                "pam.service", "pam.default_role",
                "fprintd_bus", "fingerprint_timeout", "fprintd_prints", "invalidate_on_new_fingers", "pam.utmp",
                "pam.logind_sessions",
                "pam.confirm_system_accounts", "pam.setuid_other_users",
                "offline", "tpm_lockout", "directory.local_groups", "directory.keep",
                "directory.offline_accounts",
            ],
            prefixes: ["pam.role."]
        )
        if let directory = file.string("state_dir") {
            guard directory.hasPrefix("/") else { throw fail("state_dir", "must be an absolute path") }
            stateDirectory = directory
        }
        if let url = file.string("manager_url") {
            do { managerURL = try ManagerURL(url) } catch { throw fail("manager_url", "is not valid: \(error)") }
        }
        if let caFile = file.string("ca_file") {
            guard caFile.hasPrefix("/") else { throw fail("ca_file", "must be an absolute path") }
            http.caFile = caFile
        }
        http.proxy = file.string("proxy").flatMap { $0.isEmpty ? nil : $0 }
        http.timeoutMilliseconds = Int(
            try file.milliseconds("timeout", in: 500...120_000) ?? Int64(http.timeoutMilliseconds))
        http.connectTimeoutMilliseconds = Int(
            try file.milliseconds("connect_timeout", in: 200...60_000) ?? Int64(http.connectTimeoutMilliseconds))
        pamService = file.string("pam.service") ?? pamService
        pamDefaultRole = file.string("pam.default_role") ?? pamDefaultRole
        for (key, entry) in file.entries where key.hasPrefix("pam.role.") {
            pamRoles[String(key.dropFirst("pam.role.".count))] = entry.value
        }
        if let tcti = file.string("tcti") {
            guard !tcti.isEmpty, tcti.utf8.count <= 256,
                tcti.contains(":") || ["device", "swtpm", "mssim", "tabrmd"].contains(tcti)
            else {
                throw fail("tcti", "must name a TCTI such as device:/dev/tpmrm0 or swtpm:path=/run/swtpm.sock")
            }
            self.tcti = tcti
        }
        let bus = file.string("fprintd_bus") ?? fingerprintReader.busAddress
        guard bus.hasPrefix("unix:path=/"), bus.utf8.count <= 256 else {
            throw fail("fprintd_bus", "must be unix:path=/… (the system bus socket)")
        }
        let wait =
            try file.milliseconds("fingerprint_timeout", in: 1_000...120_000)
            ?? Int64(fingerprintReader.timeoutMilliseconds)
        let prints = file.string("fprintd_prints") ?? fingerprintReader.printsDirectory
        guard prints.hasPrefix("/"), prints.utf8.count <= 256 else {
            throw fail("fprintd_prints", "must be an absolute path (fprintd's /var/lib/fprint)")
        }
        fingerprintReader = FingerprintReader(
            busAddress: bus, timeoutMilliseconds: Int(wait), printsDirectory: prints,
            invalidatesOnNewFingers: try file.bool("invalidate_on_new_fingers")
                ?? fingerprintReader.invalidatesOnNewFingers)
        for (key, path) in [
            ("pam.utmp", \SessionRecords.utmpPath), ("pam.logind_sessions", \SessionRecords.logindSessionsDirectory),
        ] {
            guard let value = file.string(key) else { continue }
            guard value.hasPrefix("/"), value.utf8.count <= 256 else { throw fail(key, "must be an absolute path") }
            sessionRecords[keyPath: path] = value
        }
        if let groups = file.list("directory.local_groups") {
            for group in groups where !LocalGroupName.isValid(group) || LocalGroupName.rootEquivalent.contains(group) {
                throw fail(
                    "directory.local_groups",
                    LocalGroupName.rootEquivalent.contains(group)
                        ? "may not grant \(group), which gives what only root has; make such people root instead"
                        : "lists local group names, not '\(group.prefix(64))'")
            }
            grantedLocalGroups = Set(groups)
        }
        directoryKeepMilliseconds =
            try file.milliseconds("directory.keep", in: 3_600_000...(365 * 86_400_000)) ?? directoryKeepMilliseconds
        offlineAccountsMilliseconds =
            try file.milliseconds("directory.offline_accounts", in: 0...(365 * 86_400_000))
            ?? offlineAccountsMilliseconds
        confirmsSystemAccounts = try file.bool("pam.confirm_system_accounts") ?? confirmsSystemAccounts
        setuidCallersMayUseOtherEnrolments =
            try file.bool("pam.setuid_other_users") ?? setuidCallersMayUseOtherEnrolments
        if let kind = file.string("device_key") {
            guard let preference = DeviceKeyPreference(rawValue: kind) else {
                throw fail("device_key", "must be tpm, software or auto")
            }
            deviceKey = preference
        }
        if let mode = file.string("offline") {
            guard let value = OfflineMode(rawValue: mode) else { throw fail("offline", "must be auto or never") }
            offline = value
        }
        if let policy = file.string("tpm_lockout") {
            guard let value = TPMLockoutPolicy(rawValue: policy) else {
                throw fail("tpm_lockout", "must be take, organization or leave")
            }
            tpmLockout = value
        }
    }

    /// Reads the file at `path`; a missing file at the default path means defaults, anywhere else it is an error.
    public static func load(path: String = defaultPath) throws -> ClientConfiguration {
        let data: Data?
        do { data = try AtomicFile.readTrusted(path, limit: ConfigFile.maximumSize) } catch let error
            as AtomicFile.UntrustedFile
        {
            throw XignSdkError(.untrustedFile, "refused the config file: \(error)")
        } catch {
            throw XignSdkError(.invalidInput, "cannot read the config file: \(error)")
        }
        guard let data else {
            if path == defaultPath { return ClientConfiguration() }
            throw XignSdkError(.invalidInput, "the config file \(path) does not exist")
        }
        do {
            return try ClientConfiguration(file: ConfigFile(text: String(decoding: data, as: UTF8.self), source: path))
        } catch {
            throw XignSdkError(.invalidInput, "\(error)")
        }
    }
}
