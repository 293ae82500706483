import FoundationEssentials
import XignCore
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// A login with this machine's enrolment: the manager's challenge signed with the device key and the factors the
/// role asks for, in the SDKs' order (initialization data, start, role, attributes, factors, finish, code, token).
public struct LocalLogin {
    /// The steps that wait for the manager, for `xign-bench` to time; the token comes with the finish from a manager
    /// that sends it there.
    public enum RoundTrip: Sendable { case start, finish, token }

    let login: Login
    let sdk: XignSdk
    let enrolment: IdentityManagerEntity
    let service: String
    let roleName: String
    /// Called after each round trip.
    public var afterRoundTrip: (RoundTrip) -> Void = { _ in }

    init(login: Login, sdk: XignSdk, enrolment: IdentityManagerEntity, service: String, role: String) {
        self.login = login
        self.sdk = sdk
        self.enrolment = enrolment
        self.service = service
        self.roleName = role
    }

    /// For a front end other than the module's own dispatch (`xign-bench`): the enrolment is given, not looked up.
    public init(
        sdk: XignSdk, enrolment: IdentityManagerEntity, service: String, role: String, conversation: any Conversation
    ) {
        let caller = LoginCaller(user: enrolment.localUser, service: nil, ruser: nil, rhost: nil)
        self.init(
            login: Login(caller: caller, options: LoginOptions(), conversation: conversation, log: { _, _ in }),
            sdk: sdk, enrolment: enrolment,
            service: service, role: role)
    }

    /// Runs the login once; errors are the SDK's, for `Login.outcome(of:)`.
    public func run() throws -> LoginOutcome {
        let authenticator = sdk.authenticator
        let data = try authenticator.fetchInAppAuthenticationInitializationData(
            enrolment: enrolment, service: service, host: XignSdk.hostName(), localUser: login.caller.user)
        let request: AuthenticateRequest
        do { request = try authenticator.startAuthenticationSynchronous(data: data) } catch let error as XignSdkError
            where error.errorCode == .managerUnreachable || error.errorCode == .timeout
        {
            // Only a manager that does not answer at all: a certificate or signature that does not check is never a
            // reason to go offline, nor is any answer.
            guard
                let outcome = try OfflineLogin(
                    login: login, sdk: sdk, enrolment: enrolment, service: login.caller.service ?? service,
                    role: roleName
                ).run(unreachable: error)
            else { throw error }
            return outcome
        }
        afterRoundTrip(.start)
        guard let role = request.roles.first(where: { $0.name == roleName }) else {
            login.log(
                LOG_ERR,
                "the manager's service \(service) has no role \(roleName) (it offers \(request.roles.map(\.name).joined(separator: ", ")))"
            )
            return .misconfigured(.role)
        }
        request.setSelection(role)
        for info in request.info.attributes where info.isDataMissing && info.isRequired {
            let answer = try login.ask("\(request.relyingPartyName) needs your \(info.name): ", echo: true)
            guard info.setValue(value: answer) == .valid else {
                login.tell("That \(info.name) is not valid.", isError: true)
                return .refused(.attributeInvalid)
            }
        }
        guard
            case .success(let information) = try authenticator.prepareAuthenticationUserInformationSynchronous(
                request: request)
        else {
            login.tell("XignIn: the requested information is incomplete.", isError: true)
            return .refused(.attributeMissing)
        }
        guard
            let factors = information.requestedAuthenticators.first(where: { Set($0).isSubset(of: enrolment.factors) })
        else {
            let wanted = information.requestedAuthenticators.map { $0.map(\.rawValue).joined(separator: "+") }.joined(
                separator: " or ")
            login.tell("XignIn: role \(roleName) needs \(wanted), which this machine has not enrolled.", isError: true)
            return .refused(.factorMissing)
        }
        for factor in factors {
            switch factor {
            case .pin:
                let alias = DisplayText.sanitized(enrolment.alias, keepingLineFeeds: false)
                let pin = try login.ask(login.options.prompt.replacing("%a", with: alias), echo: false)
                guard !pin.isEmpty else { return .refused(.noPIN) }
                try information.sign(factor: PinFactor(pin))
            case .biometric:
                try information.sign(
                    factor: BiometricFactor { login.dialogue.instruct("XignIn: \($0)", isError: false) })
            default:
                try information.sign(factor: DeviceFactor())
            }
        }
        let result = try authenticator.finishAuthenticationSynchronous(userInfo: information)
        afterRoundTrip(.finish)
        switch result {
        case .lockout(let lock, _):
            if lock.isPermanent {
                login.tellLocked(lock)
            } else {
                login.tell(
                    "Wrong PIN. XignIn is locked until \(lock.lockedUntil.localDescription); try again after that time.",
                    isError: true)
            }
            return .wrongPIN(lock)
        case .serviceLogin(let serviceLogin):
            let token = try authenticator.fetchToken(
                try authenticator.fetchAuthorizationCode(serviceLogin), expecting: data)
            afterRoundTrip(.token)
            login.debug(
                "token for \(token.subject), role \(token.role), host \(token.host), valid until \(token.expiresAt.localDescription)"
            )
            if abs(token.managerClockOffsetMilliseconds) > Self.clockWarningMilliseconds {
                // Logins do not depend on it (lifetimes are measured here), but TLS and logs do.
                login.log(
                    LOG_WARNING,
                    "this host's clock differs from the manager's by \(token.managerClockOffsetMilliseconds / 1000) s (manager minus host); check NTP"
                )
            }
            return .signedIn
        }
    }

    static let clockWarningMilliseconds: Int64 = 300_000
}
