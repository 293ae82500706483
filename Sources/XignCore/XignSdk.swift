import FoundationEssentials
import XignCrypto
import XignDevice
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// The SDK's entry point for one local user on this machine.
public struct XignSdk {
    public let configuration: ClientConfiguration
    public let localUser: String
    public let store: IdentityManagerStore
    public let http: HTTPClient
    let keys: DeviceKeys

    public init(configuration: ClientConfiguration, localUser: String) throws {
        guard !localUser.isEmpty, localUser.utf8.count <= WireLimit.localUser, !localUser.contains("/") else {
            throw XignSdkError(.invalidInput, "'\(localUser.prefix(64))' is not a valid local user name")
        }
        self.configuration = configuration
        self.localUser = localUser
        store = IdentityManagerStore(directory: configuration.stateDirectory)
        http = HTTPClient(configuration: configuration.http)
        keys = DeviceKeys(
            software: SoftwareDeviceKeyStore(directory: store.keyDirectory),
            tpm: TPMDeviceKeyStore(directory: store.keyDirectory, tcti: configuration.tcti),
            preference: configuration.deviceKey
        )
    }

    /// Where the next device or host key will be made (`device_key`), and a warning when `auto` falls back to software.
    public func newKeyKind() -> (kind: KeyKind, warning: String?) {
        let (store, warning) = keys.storeForNewKeys()
        return (store.kind, warning)
    }

    public var registry: Registry { Registry(http: http) }

    public func personalizer(managerURLOverride: ManagerURL? = nil) -> Personalizer {
        Personalizer(
            http: http, store: store, keys: keys, localUser: localUser, device: Self.deviceInformation(),
            managerURLOverride: managerURLOverride,
            fingerprints: configuration.fingerprintReader, offline: offlineLogins)
    }

    /// Nevis's DeviceInformation for this machine: its host name and platform.
    /// This machine's name, as the manager binds tokens to it and sudo and su name it in PAM_RHOST.
    public static func hostName() -> String {
        var name = [CChar](repeating: 0, count: 256)
        guard gethostname(&name, name.count - 1) == 0 else { return "localhost" }
        return String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func deviceInformation() -> DeviceInformationMessage {
        var system = utsname()
        uname(&system)
        func text<T>(_ field: T) -> String {
            withUnsafeBytes(of: field) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        }
        return DeviceInformationMessage(
            name: String(hostName().prefix(128)),
            platform: String("Linux \(text(system.release)) \(text(system.machine))".prefix(128)))
    }

    /// The enrolment named by `idmIdentifier`, for this machine.
    public func entity(_ idmIdentifier: String) throws -> IdentityManagerEntity { try store.entity(idmIdentifier) }

    /// Whether the manager revoked the device too, had forgotten it already, or was not asked.
    public enum RemovalOutcome: Sendable, Equatable {
        /// The manager revoked the device, and it is gone here too.
        case revoked
        /// The manager did not know the device any more; it is gone here.
        case alreadyGoneAtManager
        /// Removed here only, as asked.
        case localOnly
    }

    /// Deregisters: revokes the device at the manager (signed with its key), then forgets it here.
    /// If the manager cannot be reached nothing is removed, unless `localOnly`.
    public func remove(idmIdentifier: String, localOnly: Bool) throws -> RemovalOutcome {
        let entity = try entity(idmIdentifier)
        try store.checkWritable()
        var outcome = RemovalOutcome.localOnly
        if !localOnly {
            do {
                try revoke(entity)
                outcome = .revoked
            } catch let error as XignSdkError where error.errorCode == .deviceNotEnrolled {
                outcome = .alreadyGoneAtManager
            }
        }
        try store.forget(entity, keys: keys)
        return outcome
    }

    private func revoke(_ entity: IdentityManagerEntity) throws {
        let managerKey = try entity.pinnedManagerKey()
        let key: any DeviceKey
        do { key = try keys.store(for: entity.keyKind).load(entity.keyReference) } catch {
            throw XignSdkError(.deviceKeyFailure, "\(error); use --local-only to forget the enrolment anyway")
        }
        let result = try deviceSigned(
            entity, key: key, managerKey: managerKey, path: APIPath.deviceRevocations,
            answer: SignedAnswerType.revocation,
            as: RevocationResultMessage.self, nonceOf: \.nonce
        ) { RevokeRequest(deviceId: entity.idmIdentifier, challenge: $0, nonce: $1) }
        guard result.deviceId == entity.idmIdentifier else {
            throw XignSdkError(.invalidManagerResponse, "the manager revoked another device")
        }
    }

    /// A request the device signs over a fresh /v1/challenges challenge; `request` gets the challenge and the nonce.
    func deviceSigned<Answer: Decodable & Sendable>(
        _ entity: IdentityManagerEntity, key: any DeviceKey, managerKey: P256PublicKey, path: String,
        answer type: String, as: Answer.Type,
        nonceOf: (Answer) -> String, request: (_ challenge: String, _ nonce: String) -> some Encodable
    ) throws -> Answer {
        let client = ManagerClient(url: entity.managerURL, http: http)
        let challenge = try client.challenge(APIPath.challenges, ChallengeRequest(deviceId: entity.idmIdentifier))
        let nonce = try ManagerClient.nonce()
        let body = try JSONEncoder.canonical.encode(request(challenge, nonce))
        let compact = try client.postDeviceSigned(path, body: body, challenge: challenge, key: key)
        return try ManagerClient.verify(
            compact, type: type, key: managerKey, as: Answer.self, nonce: nonce, nonceOf: nonceOf)
    }
}
