import Foundation
import XignProtocol

/// Everything the manager reads from its config file, with the defaults a fresh install runs with.
public struct ManagerConfiguration: Sendable {
    public struct Category: Sendable {
        public var id: String
        public var types: [String]
        public var attributes: [AttributeMessage]
    }

    /// A service users authenticate to, such as the machine logins of pam_xign.
    public struct Service: Sendable {
        public var id: String
        public var relyingPartyName: String
        /// Each role names the factor combinations it accepts; the PAM service picks the role.
        public var roles: [RoleMessage]
        /// Attributes the service asks for; required ones must be confirmed.
        public var attributes: [AttributeMessage]
        public var tokenLifetimeMilliseconds: Int64
        /// What this service demands of a device's key beyond the manager's `require_hardware_key`.
        public var requireHardwareKey: HardwareKeyRequirement

        public init(
            id: String, relyingPartyName: String, roles: [RoleMessage], attributes: [AttributeMessage],
            tokenLifetimeMilliseconds: Int64,
            requireHardwareKey: HardwareKeyRequirement = .none
        ) {
            (self.id, self.relyingPartyName, self.roles, self.attributes) = (id, relyingPartyName, roles, attributes)
            (self.tokenLifetimeMilliseconds, self.requireHardwareKey) = (tokenLifetimeMilliseconds, requireHardwareKey)
        }
    }

    public struct Lockout: Sendable {
        /// Failures that are answered without a wait. Later failures wait `baseDelay * 2^(n-1)`, capped at `maxDelay`.
        public var freeAttempts = 0
        public var baseDelayMilliseconds: Int64 = 5_000
        public var maxDelayMilliseconds: Int64 = 3_600_000
        /// The failure that makes the lock permanent. It cannot be switched off (docs/design.md, invariant 6).
        public var maxAttempts = 10

        public init() {}

        /// The lock after the `failures`-th consecutive failure at time `now`.
        public func lock(afterFailures failures: Int, now: Int64) -> LockoutMessage {
            if failures >= maxAttempts {
                return LockoutMessage(isPermanent: true, lockedUntil: now, failedAttempts: failures, issuedAt: now)
            }
            let delayed = failures - freeAttempts
            guard delayed > 0 else {
                return LockoutMessage(isPermanent: false, lockedUntil: now, failedAttempts: failures, issuedAt: now)
            }
            let doublings = min(delayed - 1, 40)
            let (scaled, overflow) = baseDelayMilliseconds.multipliedReportingOverflow(by: Int64(1) << doublings)
            let delay = overflow ? maxDelayMilliseconds : min(scaled, maxDelayMilliseconds)
            return LockoutMessage(isPermanent: false, lockedUntil: now + delay, failedAttempts: failures, issuedAt: now)
        }
    }

    /// Offline login on devices with a TPM (`[offline]`); an account may have its own (`admin accounts set-offline`).
    public struct Offline: Sendable, Equatable {
        /// How long after its last online login a device may log in offline; 0 turns offline login off.
        public var graceMilliseconds: Int64 = 7 * 86_400_000
        /// Wrong offline PINs that end offline login until the next online login.
        public var maxFailures = 5

        public init() {}

        public static let graceRange: ClosedRange<Int64> = 0...(90 * 86_400_000)
        public static let maxFailuresRange = 1...20
    }

    /// Login confirmations that hosts ask for (`[confirmation]`).
    public struct Confirmation: Sendable {
        /// How long a user has to approve; below sshd's LoginGraceTime of 120 s.
        public var lifetimeMilliseconds: Int64 = 90_000
        /// Pending confirmations per source (the host and the remote address it reports) and per account; at a cap the
        /// oldest one nobody opened makes room (push bombing, and a stranger filling the user's queue).
        public var maxPending = 3
        public var maxPendingPerAccount = 10
        /// After a denial, no new confirmation from the same source for the account for this long.
        public var denialCooldownMilliseconds: Int64 = 30_000
        /// Wrong codes typed before the confirmation is denied.
        public var maxCodeFailures = 3
        /// The longest an approved SSH login covers its session where a host group's sudo policy is `session`.
        public var sessionCoverMilliseconds: Int64 = 8 * 3_600_000
        public static let longestSessionCover: Int64 = 8 * 3_600_000

        public init() {}
    }

    public var listenHost = "127.0.0.1"
    public var listenPort = 8440
    /// The address clients reach; goes into the activation data. Defaults to http://listenHost:listenPort.
    public var publicURL: ManagerURL?
    public var tls: TLS?
    /// Where /metrics (Prometheus text) is served, apart from the API; off when nil.
    public var metricsListen: (host: String, port: Int)?
    /// The SQLite file; unused when `postgreSQL` is set.
    public var databasePath = "/var/lib/xign-manager/manager.sqlite"
    public var postgreSQL: PostgreSQL?
    /// Expired authentications, sessions, challenges and confirmations are deleted this long after they ran out.
    public var keepExpiredMilliseconds: Int64 = 3_600_000
    /// Audit entries are deleted this long after the event.
    public var auditKeepMilliseconds: Int64 = 365 * 86_400_000
    public var limits = Limits()
    /// Off: accounts come only from `xign-manager admin invite`; the registration routes answer 403.
    public var registrationIsOpen = true
    /// How long activation data stays usable; the first personalization voids it before that.
    public var activationDataLifetimeMilliseconds: Int64 = 7 * 86_400_000
    public var signingKeyPath = "/var/lib/xign-manager/signing-key.pem"
    /// The key PINs are sealed to: apart from the signing key, which only signs (docs/security.md, G10).
    public var pinSealingKeyPath = "/var/lib/xign-manager/pin-sealing-key.pem"
    public var pepperPath = "/var/lib/xign-manager/pin-pepper"
    /// The pepper new PIN verifiers are made with; `keys.pin_pepper = tpm` keeps it in this machine's TPM.
    public var pinPepperKind = PINPepperKind.file
    /// The TPM for `pinPepperKind == .tpm`, as a TCTI configuration.
    public var tcti = "device:/dev/tpmrm0"
    /// The TPM-wrapped blob of the TPM pepper, next to the file pepper.
    public var pepperTPMPath: String { pepperPath + ".tpm" }
    public var outboxPath = "/var/lib/xign-manager/outbox"
    public var mailFrom = "xign-manager@localhost"
    /// host:port of an SMTP relay; mail goes to the outbox when unset.
    public var smtpRelay: String?
    public var pinPolicy = PinPolicyMessage(
        minLength: 5, maxLength: 32, digitsOnly: true, maxSequenceLength: 3, maxSimilarDigits: 2,
        blacklist: ["12345", "54321", "11111", "00000", "12121", "13579", "98765"]
    )
    /// PBKDF2 iterations of the PIN verifier: NIST SP 800-63B's floor. The pepper and the lockout protect a PIN;
    /// the stretching only slows an attacker who holds the pepper too (docs/protocol.md).
    public var pinHashIterations = 10_000
    public var aliasPolicy = AliasPolicyMessage(minLength: 1, maxLength: 48)
    public var categories = [
        Category(
            id: "email", types: ["email"],
            attributes: [
                AttributeMessage(name: "email", isRequired: true),
                AttributeMessage(name: "givenName", isRequired: false),
                AttributeMessage(name: "familyName", isRequired: false),
            ])
    ]
    /// Service-mapping ids of linked services; arbitrary user attributes are kept only for these.
    public var linkedServices: [String] = []
    /// Email domains that may not register (answered as notAvailable).
    public var blockedDomains: [String] = []
    public var lockout = Lockout()
    public var confirmation = Confirmation()
    public var sessionLifetimeMilliseconds: Int64 = 300_000
    /// The default: machine logins, where sudo can be made to demand more than login.
    /// The identity providers a person may register through, and the one offered first.
    public var identityProviders: [IdentityProviderSettings] = []
    public var defaultIdentityProvider: String?
    public var services = [
        Service(
            id: "pam", relyingPartyName: "Linux login",
            roles: [
                RoleMessage(name: "login", requestedAuthenticators: [[.device, .pin]]),
                RoleMessage(name: "sudo", requestedAuthenticators: [[.device, .pin]]),
            ],
            attributes: [], tokenLifetimeMilliseconds: 60_000
        )
    ]
    public var requireHardwareKey = HardwareKeyRequirement.none
    /// The CA certificates (PEM or DER files) that EK certificates must chain to for a key to count as attested.
    public var attestationCADirectory = "/etc/xign-manager/tpm-ca"
    public var offline = Offline()
    /// The uids (and equal gids) accounts with a login name are given, in order, never twice (`[users] uid_range`).
    public var uidRange = UnixIdRange.standard

    public init() {}

    public var effectivePublicURL: ManagerURL {
        if let publicURL { return publicURL }
        let host = listenHost.contains(":") ? "[\(listenHost)]" : listenHost
        return (try? ManagerURL("\(tls == nil ? "http" : "https")://\(host):\(listenPort)")) ?? .localDefault
    }

    /// HOST:PORT (an IPv6 host in brackets), with a host a URL can name; nil otherwise.
    public static func listenAddress(_ text: String) -> (host: String, port: Int)? {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (0...65535).contains(port)
        else { return nil }
        let host = String(text[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        guard (try? ManagerURL("http://\(host.contains(":") ? "[\(host)]" : host):\(max(port, 1))")) != nil else {
            return nil
        }
        return (host, port)
    }

    /// `mail.smtp_relay`'s HOST:PORT, the host as written; the config check and the relay share it.
    public static func relayAddress(_ text: String) -> (host: String, port: Int)? {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (1...65535).contains(port)
        else { return nil }
        return (String(text[..<colon]), port)
    }

    static let knownAttributes: Set<String> = [
        "email", "givenName", "familyName", "phone", "birthdate", "placeOfBirth", AttributeValidator.loginName,
    ]

    public init(file: ConfigFile) throws {
        var known = Self.deploymentKeys.union([
            "server.listen", "server.public_url",
            "storage.driver", "storage.path",
            "keys.signing_key", "keys.pin_sealing_key", "keys.pin_pepper", "keys.tcti",
            "mail.outbox", "mail.from", "mail.smtp_relay",
            "pin.min_length", "pin.max_length", "pin.digits_only", "pin.max_sequence_length", "pin.max_similar_digits",
            "pin.blacklist", "pin.hash_iterations",
            "registration.categories", "registration.alias_min_length", "registration.alias_max_length",
            "registration.linked_services", "registration.blocked_domains",
            "lockout.free_attempts", "lockout.base_delay", "lockout.max_delay", "lockout.max_attempts",
            "session.lifetime", "policy.require_hardware_key", "attestation.ca_directory", "audit.keep",
            "confirmation.lifetime", "confirmation.max_pending", "confirmation.max_pending_per_account",
            "confirmation.denial_cooldown", "confirmation.session_cover",
            "confirmation.max_code_failures", "offline.grace", "offline.max_failures", "users.uid_range",
        ])
        let fail = file.fail
        try readServerKeysAndMail(file, fail: fail)
        try readPINAndRegistration(file, known: &known, fail: fail)
        try readLockoutAndConfirmation(file, fail: fail)
        try readServices(file, known: &known, fail: fail)
        try readIdentityProviders(file, known: &known, fail: fail)
        try file.rejectUnknownKeys(known)
    }

    private mutating func readServerKeysAndMail(
        _ file: ConfigFile, fail: (String, String) -> ConfigFile.ParseError
    ) throws {
        if let listen = file.string("server.listen") {
            guard let address = Self.listenAddress(listen) else {
                throw fail("server.listen", "must be HOST:PORT, for example 127.0.0.1:8440")
            }
            (listenHost, listenPort) = address
        }
        if let url = file.string("server.public_url") {
            do { publicURL = try ManagerURL(url) } catch { throw fail("server.public_url", "is not valid: \(error)") }
        }
        try readDeployment(file, fail: fail)
        databasePath = file.string("storage.path") ?? databasePath
        signingKeyPath = file.string("keys.signing_key") ?? signingKeyPath
        pinSealingKeyPath = file.string("keys.pin_sealing_key") ?? pinSealingKeyPath
        if let pepper = file.string("keys.pin_pepper") {
            if pepper == "tpm" { pinPepperKind = .tpm } else { pepperPath = pepper }
        }
        if let tcti = file.string("keys.tcti") {
            guard !tcti.isEmpty, tcti.count <= 256, !tcti.contains(where: { $0.isNewline }) else {
                throw fail("keys.tcti", "must be a TCTI such as device:/dev/tpmrm0")
            }
            self.tcti = tcti
        }
        outboxPath = file.string("mail.outbox") ?? outboxPath
        mailFrom = file.string("mail.from") ?? mailFrom
        if let relay = file.string("mail.smtp_relay") {
            guard Self.relayAddress(relay) != nil else {
                throw fail("mail.smtp_relay", "must be HOST:PORT, for example 127.0.0.1:25")
            }
            smtpRelay = relay
        }
    }

    private mutating func readPINAndRegistration(
        _ file: ConfigFile, known: inout Set<String>, fail: (String, String) -> ConfigFile.ParseError
    ) throws {
        pinPolicy.minLength = try file.integer("pin.min_length", in: 4...64) ?? pinPolicy.minLength
        pinPolicy.maxLength = try file.integer("pin.max_length", in: 4...64) ?? pinPolicy.maxLength
        guard pinPolicy.minLength <= pinPolicy.maxLength else {
            throw fail("pin.min_length", "must not exceed pin.max_length")
        }
        pinPolicy.digitsOnly = try file.bool("pin.digits_only") ?? pinPolicy.digitsOnly
        pinPolicy.maxSequenceLength =
            try file.integer("pin.max_sequence_length", in: 2...64) ?? pinPolicy.maxSequenceLength
        pinPolicy.maxSimilarDigits =
            try file.integer("pin.max_similar_digits", in: 1...64) ?? pinPolicy.maxSimilarDigits
        pinPolicy.blacklist = file.list("pin.blacklist") ?? pinPolicy.blacklist
        pinHashIterations = try file.integer("pin.hash_iterations", in: 1_000...5_000_000) ?? pinHashIterations
        aliasPolicy.minLength = try file.integer("registration.alias_min_length", in: 1...128) ?? aliasPolicy.minLength
        aliasPolicy.maxLength = try file.integer("registration.alias_max_length", in: 1...128) ?? aliasPolicy.maxLength
        linkedServices =
            try Self.identifiers(
                file.list("registration.linked_services"), key: "registration.linked_services", fail: fail)
            ?? linkedServices
        blockedDomains = (file.list("registration.blocked_domains") ?? blockedDomains).map { $0.lowercased() }
        if let ids = try Self.identifiers(
            file.list("registration.categories"), key: "registration.categories", fail: fail)
        {
            guard !ids.isEmpty else { throw fail("registration.categories", "must name at least one category") }
            categories = try ids.map { id in
                let typesKey = "registration.category.\(id).types",
                    attributesKey = "registration.category.\(id).attributes"
                known.formUnion([typesKey, attributesKey])
                let types = file.list(typesKey) ?? [id]
                for type in types where !["anonymous", "email", "phone", "idCard"].contains(type) {
                    throw fail(typesKey, "names '\(type)'; use anonymous, email, phone or idCard")
                }
                // "email!" marks a required attribute.
                let attributes = try (file.list(attributesKey) ?? ["email!"]).map { item in
                    let name = item.hasSuffix("!") ? String(item.dropLast()) : item
                    guard Self.knownAttributes.contains(name) else {
                        throw fail(
                            attributesKey,
                            "names '\(name)'; known attributes: \(Self.knownAttributes.sorted().joined(separator: ", "))"
                        )
                    }
                    return AttributeMessage(name: name, isRequired: item.hasSuffix("!"))
                }
                return Category(id: id, types: types, attributes: attributes)
            }
        }
    }

    private mutating func readLockoutAndConfirmation(
        _ file: ConfigFile, fail: (String, String) -> ConfigFile.ParseError
    ) throws {
        lockout.freeAttempts = try file.integer("lockout.free_attempts", in: 0...20) ?? lockout.freeAttempts
        lockout.baseDelayMilliseconds =
            try file.milliseconds("lockout.base_delay", in: 100...86_400_000) ?? lockout.baseDelayMilliseconds
        lockout.maxDelayMilliseconds =
            try file.milliseconds("lockout.max_delay", in: 100...(30 * 86_400_000)) ?? lockout.maxDelayMilliseconds
        lockout.maxAttempts = try file.integer("lockout.max_attempts", in: 1...100) ?? lockout.maxAttempts
        guard lockout.freeAttempts < lockout.maxAttempts else {
            throw fail("lockout.free_attempts", "must be below lockout.max_attempts")
        }
        auditKeepMilliseconds =
            try file.milliseconds("audit.keep", in: 3_600_000...(3650 * 86_400_000)) ?? auditKeepMilliseconds
        sessionLifetimeMilliseconds =
            try file.milliseconds("session.lifetime", in: 10_000...3_600_000) ?? sessionLifetimeMilliseconds
        confirmation.lifetimeMilliseconds =
            try file.milliseconds("confirmation.lifetime", in: 5_000...600_000) ?? confirmation.lifetimeMilliseconds
        confirmation.maxPending = try file.integer("confirmation.max_pending", in: 1...20) ?? confirmation.maxPending
        confirmation.sessionCoverMilliseconds =
            try file.milliseconds("confirmation.session_cover", in: 60_000...Confirmation.longestSessionCover)
            ?? confirmation.sessionCoverMilliseconds
        confirmation.maxPendingPerAccount =
            try file.integer("confirmation.max_pending_per_account", in: 1...100)
            ?? max(confirmation.maxPendingPerAccount, confirmation.maxPending)
        guard confirmation.maxPendingPerAccount >= confirmation.maxPending else {
            throw fail(
                "confirmation.max_pending_per_account", "is below confirmation.max_pending; make it at least as large")
        }
        confirmation.denialCooldownMilliseconds =
            try file.milliseconds("confirmation.denial_cooldown", in: 0...3_600_000)
            ?? confirmation.denialCooldownMilliseconds
        confirmation.maxCodeFailures =
            try file.integer("confirmation.max_code_failures", in: 1...10) ?? confirmation.maxCodeFailures
        requireHardwareKey =
            try file.string("policy.require_hardware_key").map {
                try HardwareKeyRequirement.parse($0, key: "policy.require_hardware_key", fail: fail)
            } ?? requireHardwareKey
        if let directory = file.string("attestation.ca_directory") {
            guard directory.hasPrefix("/") else { throw fail("attestation.ca_directory", "must be an absolute path") }
            attestationCADirectory = directory
        }
        offline.graceMilliseconds =
            try file.milliseconds("offline.grace", in: Offline.graceRange) ?? offline.graceMilliseconds
        offline.maxFailures =
            try file.integer("offline.max_failures", in: Offline.maxFailuresRange) ?? offline.maxFailures
        if let range = file.string("users.uid_range") {
            let bounds = range.split(separator: "-", omittingEmptySubsequences: false).map {
                Int64($0.trimmingCharacters(in: .whitespaces))
            }
            guard bounds.count == 2, let first = bounds[0], let last = bounds[1], first <= last,
                UnixIdRange.allowed.contains(first), UnixIdRange.allowed.contains(last)
            else {
                throw fail(
                    "users.uid_range",
                    "must be FIRST-LAST within \(UnixIdRange.allowed.lowerBound)-\(UnixIdRange.allowed.upperBound), for example \(UnixIdRange.standard.lowerBound)-\(UnixIdRange.standard.upperBound)"
                )
            }
            uidRange = first...last
        }
    }

    private mutating func readServices(
        _ file: ConfigFile, known: inout Set<String>, fail: (String, String) -> ConfigFile.ParseError
    ) throws {
        known.insert("services.names")
        if let ids = try Self.identifiers(file.list("services.names"), key: "services.names", fail: fail) {
            guard !ids.isEmpty else { throw fail("services.names", "must name at least one service") }
            services = try ids.map { id in
                let prefix = "service.\(id)."
                known.formUnion(
                    ["name", "roles", "attributes", "token_lifetime", "require_hardware_key"].map { prefix + $0 })
                guard
                    let roleNames = try Self.identifiers(
                        file.list(prefix + "roles"), key: prefix + "roles", fail: fail), !roleNames.isEmpty
                else {
                    throw fail("services.names", "names '\(id)', which needs \(prefix)roles")
                }
                let roles = try roleNames.map { role in
                    let key = prefix + "role.\(role).authenticators"
                    known.insert(key)
                    return RoleMessage(
                        name: role,
                        requestedAuthenticators: try Self.authenticators(
                            file.string(key) ?? "device+pin", key: key, fail: fail))
                }
                let attributes = try (file.list(prefix + "attributes") ?? []).map { item in
                    let name = item.hasSuffix("!") ? String(item.dropLast()) : item
                    guard Self.knownAttributes.contains(name) else {
                        throw fail(prefix + "attributes", "names '\(name)', which is not a known attribute")
                    }
                    return AttributeMessage(name: name, isRequired: item.hasSuffix("!"))
                }
                let name = file.string(prefix + "name") ?? id
                guard TextAttributeValidator.validate(name) == .valid else {
                    throw fail(
                        prefix + "name",
                        "must be 1 to \(TextAttributeValidator.maximumLength) printable characters: users see it at every login"
                    )
                }
                return Service(
                    id: id, relyingPartyName: name, roles: roles, attributes: attributes,
                    tokenLifetimeMilliseconds: try file.milliseconds(prefix + "token_lifetime", in: 5_000...3_600_000)
                        ?? 60_000,
                    requireHardwareKey: try file.string(prefix + "require_hardware_key").map {
                        try HardwareKeyRequirement.parse($0, key: prefix + "require_hardware_key", fail: fail)
                    } ?? .none
                )
            }
        }
    }

    /// Names clients send back in requests: each must be an identifier (`IdentifierValidator`), as the API allows no other.
    static func identifiers(
        _ names: [String]?, key: String, fail: (String, String) -> ConfigFile.ParseError
    ) throws -> [String]? {
        if let invalid = names?.first(where: { !IdentifierValidator.isValid($0) }) {
            throw fail(
                key,
                "names '\(DisplayText.sanitized(String(invalid.prefix(64))))'; use 1 to 64 printable ASCII characters without spaces"
            )
        }
        return names
    }

    /// "device+pin | device+biometric": alternatives of factors that must all be given.
    static func authenticators(
        _ text: String, key: String, fail: (String, String) -> ConfigFile.ParseError
    ) throws -> [[AuthenticatorType]] {
        try text.split(separator: "|").map { alternative in
            let factors = try alternative.split(separator: "+").map { name in
                guard let factor = AuthenticatorType(rawValue: name.trimmed) else {
                    throw fail(
                        key,
                        "names '\(name.trimmed)'; factors are \(AuthenticatorType.allCases.map(\.rawValue).joined(separator: ", "))"
                    )
                }
                return factor
            }
            guard factors.contains(.device) else { throw fail(key, "needs the device factor in every alternative") }
            return factors
        }
    }

    /// Keeps the database, the keys and the outbox in `directory` (`xign-manager --data-dir`), whatever the file said.
    public mutating func keepData(in directory: String) {
        databasePath = "\(directory)/manager.sqlite"
        signingKeyPath = "\(directory)/signing-key.pem"
        pinSealingKeyPath = "\(directory)/pin-sealing-key.pem"
        pepperPath = "\(directory)/pin-pepper"
        outboxPath = "\(directory)/outbox"
    }

    public static func load(path: String) throws -> ManagerConfiguration {
        let text: String
        do {
            guard let data = try AtomicFile.readTrusted(path, limit: ConfigFile.maximumSize) else {
                throw ConfigFile.ParseError(description: "the config file \(path) does not exist")
            }
            text = String(decoding: data, as: UTF8.self)
        } catch let error as ConfigFile.ParseError {
            throw error
        } catch let error as AtomicFile.UntrustedFile {
            throw ConfigFile.ParseError(description: "refused the config file: \(error)")
        } catch {
            throw ConfigFile.ParseError(description: "cannot read config \(path): \(error.localizedDescription)")
        }
        return try ManagerConfiguration(file: ConfigFile(text: text, source: path))
    }
}

/// Which pepper keys a PIN verifier. Stored with each verifier, so a change of `keys.pin_pepper` (or of the
/// iteration count) upgrades verifiers one correct PIN at a time.
public enum PINPepperKind: String, Sendable, CaseIterable {
    /// 32 random bytes in a 0600 file next to the database.
    case file
    /// An HMAC key inside this machine's TPM: a copy of the disk tests no PIN.
    case tpm
}
