import FoundationEssentials
import XignCrypto
import XignDevice
import XignProtocol

/// The SDKs' factor names, re-exported so front ends import XignCore alone.
public typealias AuthenticatorType = XignProtocol.AuthenticatorType
/// The SDKs' name for what is wrong with one requested attribute.
public typealias AuthenticationInformationErrorCode = AuthenticationAttributeErrorCode

/// What starts an InApp authentication: which enrolment, which service, and who logs in where.
public struct AuthenticationInitializationData: Sendable, Equatable {
    public let idmIdentifier: String
    public let service: String
    public let host: String
    public let localUser: String
    /// The enrolment as it was read once, carried to the start and the token instead of being read again.
    let entity: IdentityManagerEntity
}

/// A login the manager accepted; its authorization code stays inside, so only `fetchAuthorizationCode` can spend it.
public struct ServiceLoginResult: Sendable, Equatable {
    public let relyingPartyName: String
    public let roleName: String
    let redemption: LoginRedemption
    /// When a code runs out, on the monotonic clock: the finish request's start plus the code's lifetime,
    /// so neither the host's wall clock nor its difference to the manager's matters.
    let expiresAt: MonotonicClock.Instant
    let idmIdentifier: String
}

/// A login confirmation approved on this device: the host that asked lets the user in.
public struct UserLoginResult: Sendable, Equatable {
    /// The host's name.
    public let relyingPartyName: String
    public let roleName: String
    public let loginName: String
    public let idmIdentifier: String
}

/// How an authentication for a login ended.
public enum LoginAuthenticationResult {
    /// Continue with `fetchAuthorizationCode`, then `fetchToken`.
    case serviceLogin(ServiceLoginResult)
    /// A wrong PIN. After `lockedUntil`, sign the given information again and finish.
    case lockout(
        lockoutInformation: LockoutAttemptInformation, authenticationUserInformation: AuthenticationUserInformation)
}

/// How the approval of a login confirmation ended.
public enum ConfirmationAuthenticationResult {
    /// The host that asked lets the user in.
    case userLogin(UserLoginResult)
    case lockout(
        lockoutInformation: LockoutAttemptInformation, authenticationUserInformation: AuthenticationUserInformation)
}

/// How the merge of an organization invite ended.
public enum MergeAuthenticationResult {
    /// The invite's address now belongs to this enrolment's account, and the invite's activation data is void.
    case apiAccessMergeComplete(idmIdentifier: String)
    case lockout(
        lockoutInformation: LockoutAttemptInformation, authenticationUserInformation: AuthenticationUserInformation)
}

/// How the authentication of an api access process ended: with the grant of the process that was started.
public enum ApiAccessAuthenticationResult {
    /// Set the new PIN, then `Personalizer.finishChangePin`.
    case apiAccessChangePin(ApiAccessChangePin)
    /// Set the activation PIN (and alias), then `Personalizer.finishRequestNewActivationData`.
    case apiAccessRequestNewActivationData(ApiAccessRequestNewActivationData)
    /// Confirmed; `Personalizer.finishDeletion` deletes the account.
    case apiAccessDelete(ApiAccessDelete)
    /// `Personalizer.finishAddFactor` records the factor for this device.
    case apiAccessAddFactor(ApiAccessAddFactor)
    /// `Personalizer.finishRevokeDevice` removes the lost device.
    case apiAccessRevokeDevice(ApiAccessRevokeDevice)
    case lockout(
        lockoutInformation: LockoutAttemptInformation, authenticationUserInformation: AuthenticationUserInformation)
}

/// What a login's finish leaves for its token: a single-use code to redeem at /v1/token, or the token itself where the
/// manager sent it with the answer (checked on arrival).
enum LoginRedemption: Sendable, Equatable {
    case code(String)
    case token(LoginToken)
}

/// A single-use code for the login token, opaque to the front end; or the token itself, where it came with the finish.
public struct AuthorizationCode: Sendable, Equatable {
    let redemption: LoginRedemption
    let idmIdentifier: String

    init(redemption: LoginRedemption, idmIdentifier: String) {
        (self.redemption, self.idmIdentifier) = (redemption, idmIdentifier)
    }

    init(code: String, idmIdentifier: String) { self.init(redemption: .code(code), idmIdentifier: idmIdentifier) }
}

/// The manager-signed proof of a login, checked against the pinned key, the host, the user and the nonce.
public struct LoginToken: Sendable, Equatable {
    public let subject: String
    public let service: String
    public let role: String
    public let host: String
    public let localUser: String
    public let attributes: [String: String]
    /// On this host's clock.
    public let expiresAt: Date
    /// The manager's clock minus this host's, to within the token request's round trip. Logins do not depend on it.
    public let managerClockOffsetMilliseconds: Int64
}

/// Authentication with this machine's enrolment (the SDKs' Authenticator), synchronous for the PAM path.
public struct Authenticator {
    let http: HTTPClient
    let store: IdentityManagerStore
    let keys: DeviceKeys
    let fingerprints: FingerprintReader
    let offline: OfflineLogins

    /// InApp initialization needs no round trip: the enrolment names the manager, the service is configured locally.
    public func fetchInAppAuthenticationInitializationData(
        idmIdentifier: String, service: String, host: String, localUser: String
    ) throws -> AuthenticationInitializationData {
        try fetchInAppAuthenticationInitializationData(
            enrolment: store.entity(idmIdentifier), service: service, host: host, localUser: localUser)
    }

    /// The same, for an enrolment the caller already read (a login reads the state file once).
    public func fetchInAppAuthenticationInitializationData(
        enrolment: IdentityManagerEntity, service: String, host: String, localUser: String
    ) throws -> AuthenticationInitializationData {
        guard (1...WireLimit.identifier).contains(service.utf8.count),
            (1...WireLimit.hostName).contains(host.utf8.count),
            (1...WireLimit.localUser).contains(localUser.utf8.count)
        else {
            throw XignSdkError(.invalidInput, "service, host and user must be 1 to 64 (host: 253) characters")
        }
        return AuthenticationInitializationData(
            idmIdentifier: enrolment.idmIdentifier, service: service, host: host, localUser: localUser,
            entity: enrolment)
    }

    /// Round trip 1: the roles, attributes and challenge.
    public func startAuthenticationSynchronous(data: AuthenticationInitializationData) throws -> AuthenticateRequest {
        try start(.login(service: data.service), entity: data.entity, host: data.host, localUser: data.localUser)
    }

    /// Approves a login confirmation a host asked for: `code` is what the host shows (number matching).
    public func startAuthenticationSynchronous(
        confirmation: ConfirmationInitializationData
    ) throws -> AuthenticateRequest {
        try start(
            .confirmation(id: confirmation.confirmationId), entity: store.entity(confirmation.idmIdentifier),
            confirmationCode: confirmation.code)
    }

    /// Starts the merge process of an organization invite, confirmed with the existing enrolment's device and PIN.
    public func startAuthenticationSynchronous(
        data merge: AuthenticationInitializationDataWithSession
    ) throws -> AuthenticateRequest {
        try start(.merge(sessionId: merge.sessionId), entity: store.entity(merge.existingIdmIdentifier))
    }

    /// Starts an api access process: an authentication for that process, with device and PIN.
    public func startApiAccessSynchronous(
        _ process: ApiAccessProcess, idmIdentifier: String
    ) throws -> AuthenticateRequest {
        try start(.apiAccess(process: process), entity: store.entity(idmIdentifier))
    }

    /// Every purpose but a login happens on this machine for the enrolment's own user.
    private func start(
        _ purpose: AuthenticationPurpose, entity: IdentityManagerEntity, host: String? = nil, localUser: String? = nil,
        confirmationCode: String? = nil
    ) throws -> AuthenticateRequest {
        let localUser = localUser ?? entity.localUser
        // A remembered lock is a reason to ask, not a verdict: an administrator may have lifted it. A manager that still
        // holds it answers 423 (shown, never written); a start signed over this nonce means it is gone.
        let remembersLock = try store.pendingLockout(activationId: entity.activationId) != nil
        let managerKey = try entity.pinnedManagerKey()
        let key = try keys.load(entity.keyKind, entity.keyReference, what: "device")
        let nonce = try ManagerClient.nonce()
        let client = ManagerClient(url: entity.managerURL, http: http)
        let request: AuthenticationStartRequest
        let compact: String
        // Read once for the report and for what the answer changes.
        let offlineRecord = try offline.record(entity)
        do {
            // Signed like every device request, so nobody else can start in the device's name (and spend a confirmation's
            // code attempts, or read its lock).
            let challenge = try client.challenge(APIPath.challenges, ChallengeRequest(deviceId: entity.idmIdentifier))
            request = AuthenticationStartRequest(
                deviceId: entity.idmIdentifier, challenge: challenge, purpose: purpose,
                confirmationCode: confirmationCode,
                host: host ?? XignSdk.deviceInformation().name, localUser: localUser, nonce: nonce,
                offlineReport: OfflineLogins.report(from: offlineRecord))
            compact = try client.postDeviceSigned(
                APIPath.authentications, body: try JSONEncoder.canonical.encode(request), challenge: challenge, key: key
            )
        } catch let error as XignSdkError where error.errorCode == .deviceNotEnrolled {
            // Revoked at the manager: this machine's offline login ends with it.
            try? offline.forget(entity)
            throw error
        }
        let start = try ManagerClient.verify(
            compact, type: SignedAnswerType.authenticationStart, key: managerKey, as: AuthenticationStartMessage.self,
            nonce: nonce, nonceOf: \.nonce)
        guard start.purpose == purpose else {
            throw XignSdkError(.invalidManagerResponse, "the manager's authentication start is inconsistent")
        }
        if remembersLock { try store.recordLockout(activationId: entity.activationId, nil) }
        try offline.apply(start.offline, to: entity, readAs: offlineRecord)
        let session = AuthenticationSession(
            purpose: purpose, localUser: localUser, host: request.host, entity: entity, managerKey: managerKey,
            pinSealingKey: try ManagerClient.pinSealingKey(start.pinSealingKey), deviceKey: key,
            authenticationId: start.authenticationId, challenge: start.challenge, fingerprints: fingerprints)
        return AuthenticateRequest(start: start, session: session)
    }

    /// Checks the confirmed attributes here; the manager checks them again at finish.
    public func prepareAuthenticationUserInformationSynchronous(
        request: AuthenticateRequest
    ) throws -> PrepareAuthenticationUserInformationResult {
        guard let role = request.selection else {
            throw XignSdkError(.parametersIncomplete, "no role is selected; choose one of \(request.roles.map(\.name))")
        }
        var failed = false
        for info in request.info.attributes {
            info.error = .none
            if info.isDataMissing {
                if info.value == nil && info.isRequired { info.error = .dataMissing }
            } else if info.selection == nil && info.isRequired {
                info.error = .noAliasSelected
            }
            failed = failed || info.error != .none
        }
        return failed ? .failure(request) : .success(AuthenticationUserInformation(request: request, role: role))
    }

    /// The authorization code came with serviceLogin (batched, to save a round trip); this checks it is still fresh.
    /// Where the token itself came with it, the token is handed on.
    public func fetchAuthorizationCode(_ login: ServiceLoginResult) throws -> AuthorizationCode {
        if case .code = login.redemption, MonotonicClock.now() >= login.expiresAt {
            throw XignSdkError(.sessionExpired, "the authorization code expired; authenticate again")
        }
        return AuthorizationCode(redemption: login.redemption, idmIdentifier: login.idmIdentifier)
    }

    /// Round trip 3: the login token, unless it came with the finish (then it was checked there and no round trip is
    /// spent). It is believed only if the pinned manager key signed it for our nonce, for this host, this local user and
    /// this service, and it has not expired.
    public func fetchToken(
        _ code: AuthorizationCode, expecting data: AuthenticationInitializationData
    ) throws -> LoginToken {
        guard code.idmIdentifier == data.idmIdentifier else {
            throw XignSdkError(
                .invalidInput, "the authorization code is for another enrolment than the login it should finish")
        }
        let entity = data.entity
        let expected = LoginToken.Binding(
            entity: entity, host: data.host, localUser: data.localUser, service: data.service)
        let authorizationCode: String
        switch code.redemption {
        case .token(let token):
            try expected.check(host: token.host, localUser: token.localUser, service: token.service)
            return token
        case .code(let code):
            authorizationCode = code
        }
        let nonce = try ManagerClient.nonce()
        let client = ManagerClient(url: entity.managerURL, http: http)
        let (compact, trip) = try RoundTripTimes.measure {
            try client.postSigned(
                APIPath.token,
                body: try JSONEncoder.canonical.encode(TokenRequest(authorizationCode: authorizationCode, nonce: nonce))
            )
        }
        return try LoginToken(
            compact, nonce: nonce, managerKey: try entity.pinnedManagerKey(), for: expected, trip: trip)
    }
}

/// When a request left and its answer arrived, on the monotonic clock and on the wall clock.
struct RoundTripTimes {
    let sentAt: MonotonicClock.Instant, receivedAt: MonotonicClock.Instant
    let sentAtWall: Date, receivedAtWall: Date

    static func measure<T>(_ request: () throws -> T) rethrows -> (T, RoundTripTimes) {
        let (sentAt, sentAtWall) = (MonotonicClock.now(), Date())
        let answer = try request()
        return (
            answer,
            RoundTripTimes(
                sentAt: sentAt, receivedAt: MonotonicClock.now(), sentAtWall: sentAtWall, receivedAtWall: Date())
        )
    }
}

extension LoginToken {
    /// What a login token must be for: this enrolment's device, the host, the local user and the service.
    struct Binding {
        let entity: IdentityManagerEntity
        let host: String, localUser: String, service: String

        func check(
            host: String, localUser: String, service: String, deviceId: String? = nil, activationId: String? = nil
        ) throws {
            guard host == self.host else {
                throw XignSdkError(
                    .managerSignatureInvalid, "the login token is for the host '\(host.prefix(64))', not this one")
            }
            guard UserName.same(localUser, self.localUser) else {
                throw XignSdkError(
                    .managerSignatureInvalid,
                    "the login token is for the user '\(localUser.prefix(64))', not '\(self.localUser)'")
            }
            guard deviceId ?? entity.idmIdentifier == entity.idmIdentifier,
                activationId ?? entity.activationId == entity.activationId,
                service == self.service
            else {
                throw XignSdkError(.managerSignatureInvalid, "the login token is for another device or service")
            }
        }
    }

    /// A login token as the manager signed it (at /v1/token or with the finish), believed only if the pinned key signed
    /// it for `nonce` and `binding`, and it did not expire on its way: the nonce proves it was made after the request
    /// left, so its age is at most the round trip, and freshness needs no comparison of the two clocks.
    init(_ compact: String, nonce: String, managerKey: P256PublicKey, for binding: Binding, trip: RoundTripTimes) throws
    {
        let token = try ManagerClient.verify(
            compact, type: SignedAnswerType.loginToken, key: managerKey, as: LoginTokenMessage.self, nonce: nonce,
            nonceOf: \.nonce)
        try binding.check(
            host: token.host, localUser: token.localUser, service: token.service, deviceId: token.deviceId,
            activationId: token.activationId)
        guard let lifetime = MonotonicClock.lifetime(from: token.issuedAt, to: token.expiresAt) else {
            throw XignSdkError(.invalidManagerResponse, "the login token's lifetime is not usable")
        }
        let age = trip.receivedAt.milliseconds - trip.sentAt.milliseconds
        guard age < lifetime else {
            throw XignSdkError(
                .sessionExpired,
                "the login token expired on its way here (the manager's answer took \(age) ms, the token lasts \(lifetime) ms); try again"
            )
        }
        let midpoint = (trip.sentAtWall.millisecondsSince1970 / 2) + (trip.receivedAtWall.millisecondsSince1970 / 2)
        self.init(
            subject: token.subject, service: token.service, role: token.role, host: token.host,
            localUser: token.localUser,
            attributes: token.attributes, expiresAt: trip.sentAtWall.addingTimeInterval(Double(lifetime) / 1000),
            managerClockOffsetMilliseconds: token.issuedAt.subtractingReportingOverflow(midpoint).partialValue)
    }
}

extension XignSdk {
    public var authenticator: Authenticator {
        Authenticator(
            http: http, store: store, keys: keys, fingerprints: configuration.fingerprintReader, offline: offlineLogins)
    }
}
