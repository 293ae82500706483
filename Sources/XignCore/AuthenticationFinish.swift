import FoundationEssentials
import XignProtocol

/// Round trip 2: the finish, one function per purpose, each returning only what that purpose can end in.
extension Authenticator {
    /// A login: a service login or a lockout.
    public func finishAuthenticationSynchronous(
        userInfo: AuthenticationUserInformation
    ) throws -> LoginAuthenticationResult {
        guard case .login(let service) = userInfo.request.session.purpose else { throw startedFor(userInfo, "a login") }
        switch try finish(userInfo) {
        case .lockout(let lock): return .lockout(lockoutInformation: lock, authenticationUserInformation: userInfo)
        case .answer(let outcome, let trip, let tokenNonce):
            let session = userInfo.request.session
            guard case .serviceLogin(let login, let loginToken) = outcome, login.service == service,
                login.role == userInfo.role.name,
                let lifetime = MonotonicClock.lifetime(from: login.issuedAt, to: login.expiresAt)
            else {
                throw XignSdkError(
                    .invalidManagerResponse, "the manager answered a login with \(outcome.name) that does not fit it")
            }
            // A manager that predates tokens in the finish answers with a code only; the token is then a round trip more.
            let redemption: LoginRedemption
            if let compact = loginToken {
                guard let tokenNonce else {
                    throw XignSdkError(.invalidManagerResponse, "the manager sent a login token nobody asked for")
                }
                let binding = LoginToken.Binding(
                    entity: session.entity, host: session.host, localUser: session.localUser, service: service)
                redemption = .token(
                    try LoginToken(compact, nonce: tokenNonce, managerKey: session.managerKey, for: binding, trip: trip)
                )
            } else if let code = login.authorizationCode {
                redemption = .code(code)
            } else {
                throw XignSdkError(
                    .invalidManagerResponse, "the manager answered a login with neither its token nor a code for it")
            }
            return .serviceLogin(
                ServiceLoginResult(
                    relyingPartyName: login.relyingPartyName, roleName: login.role, redemption: redemption,
                    expiresAt: trip.sentAt.advanced(by: lifetime), idmIdentifier: session.entity.idmIdentifier
                ))
        }
    }

    /// The approval of a login confirmation: a user login for the host that asked, or a lockout.
    public func finishConfirmationSynchronous(
        userInfo: AuthenticationUserInformation
    ) throws -> ConfirmationAuthenticationResult {
        guard case .confirmation = userInfo.request.session.purpose else {
            throw startedFor(userInfo, "a confirmation")
        }
        switch try finish(userInfo) {
        case .lockout(let lock): return .lockout(lockoutInformation: lock, authenticationUserInformation: userInfo)
        case .answer(let outcome, _, _):
            guard case .userLogin(let login) = outcome, login.role == userInfo.role.name else {
                throw XignSdkError(
                    .invalidManagerResponse,
                    "the manager answered an approval with \(outcome.name) that does not fit it")
            }
            return .userLogin(
                UserLoginResult(
                    relyingPartyName: login.relyingPartyName, roleName: login.role, loginName: login.loginName,
                    idmIdentifier: userInfo.request.session.entity.idmIdentifier
                ))
        }
    }

    /// The merge of an organization invite: complete, or a lockout.
    public func finishMergeSynchronous(userInfo: AuthenticationUserInformation) throws -> MergeAuthenticationResult {
        guard case .merge = userInfo.request.session.purpose else { throw startedFor(userInfo, "a merge") }
        switch try finish(userInfo) {
        case .lockout(let lock): return .lockout(lockoutInformation: lock, authenticationUserInformation: userInfo)
        case .answer(let outcome, _, _):
            guard case .mergeComplete = outcome else {
                throw XignSdkError(.invalidManagerResponse, "the manager answered a merge with \(outcome.name)")
            }
            return .apiAccessMergeComplete(idmIdentifier: userInfo.request.session.entity.idmIdentifier)
        }
    }

    /// An api access process: the grant of the process that was started, or a lockout.
    public func finishApiAccessSynchronous(
        userInfo: AuthenticationUserInformation
    ) throws -> ApiAccessAuthenticationResult {
        let session = userInfo.request.session
        guard case .apiAccess(let process) = session.purpose else {
            throw startedFor(userInfo, "an api access process")
        }
        switch try finish(userInfo) {
        case .lockout(let lock): return .lockout(lockoutInformation: lock, authenticationUserInformation: userInfo)
        case .answer(let outcome, let trip, _):
            guard case .apiAccess(let grant) = outcome, grant.process == process else {
                throw XignSdkError(
                    .invalidManagerResponse, "the manager's api access answer does not fit the process that was started"
                )
            }
            return try ApiAccessGrant(grant, session: session, sentAt: trip.sentAt).result()
        }
    }

    /// For the built-in purposes (an approval, a merge, an api access), whose role is device and PIN and which ask
    /// for no attributes: prepares and signs. `pin` is read only once that holds; otherwise `incomplete` is thrown.
    public func signWithDeviceAndPinSynchronous(
        request: AuthenticateRequest, pin: () throws -> String, incomplete: @autoclosure () -> XignSdkError
    ) throws -> AuthenticationUserInformation {
        guard case .success(let information) = try prepareAuthenticationUserInformationSynchronous(request: request)
        else { throw incomplete() }
        try information.sign(factor: DeviceFactor())
        try information.sign(factor: PinFactor(try pin()))
        return information
    }

    private func startedFor(_ userInfo: AuthenticationUserInformation, _ wanted: String) -> XignSdkError {
        XignSdkError(
            .invalidInput, "this authentication was started for \(userInfo.request.session.purpose), not for \(wanted)")
    }

    private enum Answer {
        case lockout(LockoutAttemptInformation)
        /// Any other signed outcome, with when its request left (lifetimes count from there) and the nonce a login's
        /// token must carry.
        case answer(AuthenticationOutcome, trip: RoundTripTimes, tokenNonce: String?)
    }

    /// Signs with the device key, sends the sealed PIN, and checks the manager's signature over the answer. A
    /// lockout is remembered; any other answer means the PIN was right, so a lock this session remembered is
    /// forgotten (one remembered before it was forgotten at start).
    private func finish(_ userInfo: AuthenticationUserInformation) throws -> Answer {
        let session = userInfo.request.session
        guard userInfo.requestedAuthenticators.contains(where: { Set($0) == Set(userInfo.factors) }) else {
            throw XignSdkError(
                .parametersIncomplete,
                "sign with every factor of one combination: \(userInfo.requestedAuthenticators.map { $0.map(\.rawValue).joined(separator: "+") })"
            )
        }
        var values: [String: String] = [:]
        var selections: [String: String] = [:]
        for info in userInfo.request.info.attributes {
            if let value = info.value { values[info.name] = value }
            if let alias = info.selection { selections[info.name] = alias.alias }
        }
        let nonce = try ManagerClient.nonce()
        let sealedPin = try userInfo.pin.map {
            try ManagerClient.seal(
                $0, to: session.pinSealingKey,
                for: .authentication(id: session.authenticationId, challenge: session.challenge))
        }
        // A login asks for its token with the answer, which saves the round trip to /v1/token.
        let tokenNonce: String?
        if case .login = session.purpose { tokenNonce = try ManagerClient.nonce() } else { tokenNonce = nil }
        let request = AuthenticationFinishRequest(
            authenticationId: session.authenticationId, role: userInfo.role.name, factors: userInfo.factors,
            sealedPin: sealedPin,
            attributeValues: values, attributeSelections: selections, nonce: nonce, tokenNonce: tokenNonce,
            biometricEnrolment: userInfo.factors.contains(.biometric) ? userInfo.biometricEnrolment : nil
        )
        let client = ManagerClient(url: session.entity.managerURL, http: http)
        let (compact, trip): (String, RoundTripTimes)
        do {
            (compact, trip) = try RoundTripTimes.measure {
                try client.postDeviceSigned(
                    APIPath.authenticationFinish, body: try JSONEncoder.canonical.encode(request),
                    challenge: session.challenge,
                    key: session.deviceKey)
            }
        } catch let error as XignSdkError where error.errorCode == .biometricInvalidated {
            try? store.dropBiometricFactor(of: session.entity.idmIdentifier)
            throw error
        }
        let result = try ManagerClient.verify(
            compact, type: SignedAnswerType.authenticationResult, key: session.managerKey,
            as: AuthenticationResultMessage.self, nonce: nonce,
            nonceOf: \.nonce)
        // No finger was read, so nothing the manager answers makes this a login.
        guard !userInfo.fingersChanged else {
            throw XignSdkError(
                .biometricInvalidated,
                "the fingers enrolled on this machine changed since the fingerprint was added as a factor; run xign-setup add-factor biometric"
            )
        }
        guard case .lockout(let lock, let next) = result.outcome else {
            if session.recordedLockout { try store.recordLockout(activationId: session.entity.activationId, nil) }
            // The manager has just said the PIN is right: the offline verifier may be made or its grace start again.
            if let pin = userInfo.pin {
                let pinSuffices = userInfo.requestedAuthenticators.contains { Set($0).isSubset(of: [.device, .pin]) }
                offline.refresh(session.entity, pin: pin, role: (userInfo.role.name, pinSuffices))
            }
            return .answer(result.outcome, trip: trip, tokenNonce: tokenNonce)
        }
        let information = LockoutAttemptInformation(lock)
        try? store.recordLockout(activationId: session.entity.activationId, information)
        session.recordedLockout = true
        if let next { session.challenge = next }
        userInfo.clearSignatures()
        return .lockout(information)
    }
}
