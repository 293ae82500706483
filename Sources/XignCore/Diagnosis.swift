import FoundationEssentials
import XignAttestation
import XignCrypto
import XignDevice
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// What `xign-setup doctor` reports: each part of a working setup, checked for real.
public struct Diagnosis: Sendable {
    /// How bad one finding is; ordered, so the worst decides the exit status.
    public enum Status: String, Sendable, Comparable {
        case ok, warning, failure

        var rank: Int {
            switch self {
            case .ok: return 0
            case .warning: return 1
            case .failure: return 2
            }
        }

        public static func < (a: Status, b: Status) -> Bool { a.rank < b.rank }
    }

    /// One finding of `xign-setup doctor`, with what to do about it.
    public struct Item: Sendable {
        public let name: String
        public let status: Status
        public let detail: String
        /// What to do, when the status is not ok.
        public let hint: String?
    }

    public let items: [Item]
    public var status: Status { items.map(\.status).max() ?? .ok }
}

extension XignSdk {
    /// Checks the TPM, the device keys, the managers and the PAM configuration in `pamDirectory`; with
    /// `sshdConfiguration` (what `sshd -T` printed, or why it could not run), whether SSH logins meet pam_xign's
    /// approval; with `sudoSettings` (what `sudo -V` printed as root), on a joined host, whether sudo's own timestamp
    /// lets a sudo past the approval.
    public func diagnose(
        pamDirectory: String = "/etc/pam.d", nsswitch: String = "/etc/nsswitch.conf",
        directory: String = DirectoryFiles.directory, sshdConfiguration: Result<String, any Error>? = nil,
        sudoSettings: Result<String, any Error>? = nil
    ) -> Diagnosis {
        var items: [Diagnosis.Item] = []
        let wantsTPM = configuration.deviceKey == .tpm
        items.append(.init(name: "tcti", status: .ok, detail: configuration.tcti, hint: nil))
        var tpmAnswers = false
        var endorsement: EndorsementCertificate?
        do {
            let name = try keys.tpm.probe()
            tpmAnswers = true
            items.append(.init(name: "tpm", status: .ok, detail: "a TPM answers at \(configuration.tcti)", hint: nil))
            items.append(
                .init(
                    name: "srk", status: .ok, detail: "storage root key name \(Self.hex(name.prefix(12)))…", hint: nil))
            items.append(checkTPMLockout())
            let (item, certificate) = checkEndorsementCertificate()
            items.append(item)
            endorsement = certificate
        } catch {
            items.append(
                .init(
                    name: "tpm", status: wantsTPM ? .failure : .warning, detail: "\(error)",
                    hint: wantsTPM
                        ? "start the TPM resource manager or fix tcti; or set device_key = auto"
                        : "new keys are software keys, which a copy of the disk can use"
                ))
        }
        let newKeys =
            configuration.deviceKey == .software || (configuration.deviceKey == .auto && !tpmAnswers)
            ? "software" : "tpm"
        items.append(
            .init(
                name: "device_key", status: .ok,
                detail: "\(configuration.deviceKey.rawValue): new keys are \(newKeys) keys", hint: nil))
        let enrolments: [IdentityManagerEntity]
        do { enrolments = try store.list() } catch {
            items.append(
                .init(
                    name: "state", status: .failure, detail: "\(error)", hint: "check \(configuration.stateDirectory)"))
            enrolments = []
        }
        if enrolments.isEmpty {
            items.append(
                .init(
                    name: "enrolments", status: .warning, detail: "this machine is not personalized",
                    hint: "xign-setup register, then xign-setup personalize"))
        }
        for entity in enrolments {
            items.append(checkKey(entity, tpmAnswers: tpmAnswers))
            items.append(checkOffline(entity))
            if entity.factors.contains(.biometric) { items.append(checkFingerprint(entity)) }
        }
        var seen = Set<ManagerURL>()
        for entity in enrolments where seen.insert(entity.managerURL).inserted {
            let manager = checkManager(entity.managerURL, pinned: entity)
            items.append(manager)
            if let endorsement, manager.status == .ok {
                items.append(checkAttestation(endorsement, at: entity.managerURL))
            }
        }
        items.append(checkPAM(pamDirectory))
        if !((try? hostEnrolments()) ?? []).isEmpty {
            items += checkDirectory(pamDirectory: pamDirectory, nsswitch: nsswitch, directory: directory)
            if case .success(let text) = sudoSettings { items.append(Diagnosis.sudo(settings: text)) }
        }
        switch sshdConfiguration {
        case .success(let text): items.append(Diagnosis.sshd(effectiveConfiguration: text))
        case .failure(let error):
            items.append(
                .init(
                    name: "sshd", status: .warning, detail: "sshd -T could not tell its configuration: \(error)",
                    hint: "run doctor as root; fix what sshd -T says"))
        case nil: break
        }
        return Diagnosis(items: items)
    }

    private func checkKey(_ entity: IdentityManagerEntity, tpmAnswers: Bool) -> Diagnosis.Item {
        let name = "key \(entity.idmIdentifier.prefix(8)) (\(entity.localUser), \(entity.keyKind))"
        do {
            let key = try keys.store(for: entity.keyKind).load(entity.keyReference)
            let message = Data("xign-doctor".utf8)
            guard try key.publicKey.isValidSignature(try key.signature(for: message), for: message) else {
                return .init(
                    name: name, status: .failure, detail: "the key signs, but the signature does not verify",
                    hint: "enroll again with xign-setup personalize")
            }
            if entity.keyKind == .software && tpmAnswers && configuration.deviceKey != .software {
                return .init(
                    name: name, status: .warning,
                    detail: "loads and signs, but is a software key although this machine has a TPM",
                    hint: "personalize again to make the key in the TPM, where a copy of the disk cannot use it")
            }
            return .init(name: name, status: .ok, detail: "loads and signs", hint: nil)
        } catch {
            let failure = DeviceKeys.error(error, doing: "cannot use the key")
            return .init(
                name: name, status: .failure, detail: failure.message,
                hint: failure.errorCode == .tpmUnavailable
                    ? "fix the TPM, then run doctor again" : "enroll again with xign-setup personalize")
        }
    }

    /// The maker's EK certificate, which attestation rests on.
    private func checkEndorsementCertificate() -> (Diagnosis.Item, EndorsementCertificate?) {
        let name = "ek certificate"
        do {
            guard let (slot, der) = try keys.tpm.endorsementCertificates().first else {
                return (
                    .init(name: name, status: .ok, detail: "none: keys made in this TPM cannot be attested", hint: nil),
                    nil
                )
            }
            let certificate = try EndorsementCertificate(der: der)
            return (
                .init(name: name, status: .ok, detail: "\(slot), issued by \(certificate.issuer)", hint: nil),
                certificate
            )
        } catch {
            return (
                .init(
                    name: name, status: .warning, detail: "cannot read it: \(error)",
                    hint: "keys made here are not attested; a manager that requires attested keys refuses them"), nil
            )
        }
    }

    /// Whether the manager at `url` trusts the CA that issued this TPM's EK certificate.
    private func checkAttestation(_ certificate: EndorsementCertificate, at url: ManagerURL) -> Diagnosis.Item {
        let name = "attestation \(url)"
        do {
            let check: EndorsementCheckMessage = try ManagerClient(url: url, http: http).post(
                APIPath.endorsementChecks,
                EndorsementCheckRequest(endorsementCertificate: Base64URL.encode(certificate.der)))
            if check.accepted {
                return .init(
                    name: name, status: .ok, detail: "the manager trusts the EK certificate's issuer", hint: nil)
            }
            return .init(
                name: name, status: .warning,
                detail: check.refusal.map { DisplayText.sanitized(String($0.prefix(300))) } ?? "not accepted",
                hint:
                    "keys made here count as attested once the manager's administrator adds the TPM maker's CA to attestation.ca_directory"
            )
        } catch {
            return .init(
                name: name, status: .warning, detail: "the manager did not answer the check: \(error)",
                hint: "run doctor again later")
        }
    }

    /// The TPM's dictionary-attack protection: what bounds the guesses at an offline PIN, and whether root on this
    /// machine could lift it (docs/security.md, "Offline login").
    private func checkTPMLockout() -> Diagnosis.Item {
        do {
            let standing = try keys.pinVerifiers.standing(policy: configuration.tpmLockout)
            let state = standing.lockout
            let holder =
                !state.lockoutAuthorizationSet
                ? "lockout authorization empty"
                : standing.unprotectedBecause == nil
                    ? "lockout authorization set (tpm_lockout = \(configuration.tpmLockout.rawValue))"
                    : "lockout authorization set by another program"
            let detail =
                "\(state.failures) failure(s) counted of \(state.maxTries) allowed, one forgiven every \(state.recoverySeconds) s; \(holder)"
                + (state.isLockedOut ? "; in lockout now" : "")
            let hint: String?
            if let why = standing.unprotectedBecause {
                hint = "offline login is not offered: \(why)"
            } else if state.isLockedOut {
                hint = "offline logins wait until the TPM recovers (\(state.recoverySeconds) s a failure)"
            } else {
                hint = nil
            }
            return .init(
                name: "tpm lockout", status: state.isLockedOut || standing.unprotectedBecause != nil ? .warning : .ok,
                detail: detail, hint: hint)
        } catch {
            return .init(
                name: "tpm lockout", status: .warning, detail: "cannot read the dictionary-attack state: \(error)",
                hint: nil)
        }
    }

    /// Whether offline login is possible for the enrolment, and until when.
    private func checkOffline(_ entity: IdentityManagerEntity) -> Diagnosis.Item {
        let name = "offline \(entity.idmIdentifier.prefix(8)) (\(entity.localUser))"
        do {
            let availability = try offlineLogins.availability(of: entity)
            switch availability {
            case .available, .notOffered:
                return .init(name: name, status: .ok, detail: "offline login \(availability)", hint: nil)
            default:
                return .init(
                    name: name, status: .warning, detail: "offline login \(availability)",
                    hint: "log in once while the manager can be reached")
            }
        } catch {
            return .init(
                name: name, status: .warning, detail: "\(error)",
                hint: "offline login asks the TPM; see the tpm item above")
        }
    }

    /// An enrolment that signs with a finger needs fprintd to answer and the user's finger to be there.
    private func checkFingerprint(_ entity: IdentityManagerEntity) -> Diagnosis.Item {
        let name = "fingerprint \(entity.idmIdentifier.prefix(8)) (\(entity.localUser))"
        do {
            let fingers = try configuration.fingerprintReader.enrolledFingers(user: entity.localUser)
            guard !fingers.isEmpty else {
                return .init(
                    name: name, status: .failure, detail: "fprintd has no finger of \(entity.localUser)",
                    hint: "fprintd-enroll \(entity.localUser); until then, roles that ask for a finger refuse the login"
                )
            }
            if let recorded = entity.biometricEnrolment,
                try configuration.fingerprintReader.boundEnrolment(user: entity.localUser) != recorded
            {
                return .init(
                    name: name, status: .failure,
                    detail: "the enrolled fingers changed since the fingerprint was added as a factor",
                    hint:
                        "the next login with the finger removes the factor; run xign-setup add-factor biometric to bind it to the fingers now"
                )
            }
            return .init(name: name, status: .ok, detail: "fprintd knows \(fingers.joined(separator: ", "))", hint: nil)
        } catch {
            return .init(
                name: name, status: .failure, detail: "\(error)",
                hint:
                    "start fprintd (systemctl start fprintd) and check fprintd_bus in \(ClientConfiguration.defaultPath)"
            )
        }
    }

    private func checkManager(_ url: ManagerURL, pinned entity: IdentityManagerEntity) -> Diagnosis.Item {
        let name = "manager \(url)"
        do {
            let health: HealthMessage = try ManagerClient(url: url, http: http).get(APIPath.health)
            let pinned = try entity.pinnedManagerKey().fingerprint
            guard health.managerKeyFingerprint == pinned else {
                return .init(
                    name: name, status: .failure,
                    detail:
                        "answers with signing key \(health.managerKeyFingerprint.prefix(12))…, but this machine pinned \(pinned.prefix(12))…",
                    hint:
                        "if the manager's key was replaced on purpose, personalize again; otherwise someone may be impersonating it"
                )
            }
            return .init(
                name: name, status: .ok, detail: "reachable, version \(health.version), key as pinned", hint: nil)
        } catch {
            return .init(
                name: name, status: .failure, detail: "\(error)",
                hint: "check the network, the manager service and ca_file/proxy in the config")
        }
    }

    private func checkPAM(_ directory: String) -> Diagnosis.Item {
        var lines: [String] = []
        for file in (try? Self.directoryEntries(directory)) ?? [] {
            guard let data = try? AtomicFile.read("\(directory)/\(file)", limit: 64 * 1024) else { continue }
            for line in String(decoding: data, as: UTF8.self).split(separator: "\n")
            where line.contains("pam_xign.so") && !line.trimmed.hasPrefix("#") {
                lines.append("\(file): \(line.trimmed)")
            }
        }
        if lines.isEmpty {
            return .init(
                name: "pam", status: .warning, detail: "no PAM service in \(directory) uses pam_xign.so",
                hint: "add `auth required pam_xign.so` to /etc/pam.d/sudo (or enable the pam-auth-update profile)")
        }
        return .init(name: "pam", status: .ok, detail: lines.joined(separator: "; "), hint: nil)
    }

    static func directoryEntries(_ path: String) throws -> [String] {
        guard let directory = opendir(path) else { return [] }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            if !name.hasPrefix(".") { names.append(name) }
        }
        return names.sorted()
    }

    static func hex(_ data: Data) -> String {
        let digits = Array("0123456789abcdef")
        return String(data.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]] })
    }
}
