import Foundation
import XignCrypto
import XignProtocol

/// Login confirmation: a host asks, the user's enrolled device approves (IdentityManager+Authentication, service
/// `confirm`) or denies, and the host receives a signed decision bound to itself, the login name, the service and
/// its nonce.
extension IdentityManager {
    /// The longest a long poll is held; below common proxy idle timeouts.
    static let longestWaitMilliseconds = 25_000
    /// How long an approving device's empty list is kept without a wake-up before it is read again.
    static let emptyListKeptMilliseconds: Int64 = 60_000

    public func hostChallenge(for request: HostChallengeRequest) async throws -> ChallengeMessage {
        let challenge = ChallengeMessage(
            challenge: try SecureRandom.token(), expiresAt: Self.now() + configuration.sessionLifetimeMilliseconds)
        try await database.transaction(durability: .unsynced) { store in
            guard try await store.host(id: request.hostId) != nil else { throw Self.unknownHost }
            try await store.insertHostChallenge(challenge, hostId: request.hostId)
        }
        return challenge
    }

    static let unknownHost = ManagerError(
        .notFound, .notFound,
        "this host is not known to the manager (or was removed); join again with xign-setup host join")

    /// Starts a confirmation for the account whose login name the host gives.
    public func startConfirmation(body: Data, signature: String?) async throws -> String {
        let request = try RequestBody.decode(ConfirmationRequest.self, from: body, "the confirmation request")
        let raw = try RequestVerifier.signature(from: signature)
        let settings = configuration.confirmation
        let waitToken = try SecureRandom.token(byteCount: 16)
        let now = Self.now()
        let source = ConfirmationQueue.source(hostId: request.hostId, remoteHost: request.remoteHost)
        let confirmation = ManagerStore.ConfirmationRecord(
            id: Base32.encode(try SecureRandom.bytes(16)), hostId: request.hostId, hostName: "", accountId: "",
            loginName: request.loginName,
            service: request.service, remoteHost: request.remoteHost, source: source, tty: request.tty,
            command: request.command,
            nonce: request.nonce, waitTokenHash: Self.hashed(waitToken), code: try ConfirmationQueue.code(),
            codeFailures: 0, state: .pending,
            approvedBy: nil, createdAt: now, expiresAt: now + settings.lifetimeMilliseconds
        )
        let (accountId, displaced) = try await database.transaction { store -> (String, String?) in
            let host = try await self.signingHost(
                id: request.hostId, signature: raw, path: APIPath.confirmations, body: body,
                challenge: request.challenge, in: store)
            guard let account = try await store.loginAccount(loginName: request.loginName) else {
                throw ManagerError(.notFound, .unknownLogin, "no account has the login name \(request.loginName)")
            }
            try Self.checkLocalUser(request, of: account, on: host.name)
            let accountId = account.id
            guard try await !store.isAccountLocked(accountId) else { throw ManagerError.accountLocked }
            guard try await store.mayLogIn(accountId: accountId, hostName: host.name) else {
                throw ManagerError(
                    .forbidden, .hostNotAllowed,
                    "\(request.loginName) may not log in to \(host.name); an administrator grants it with host groups")
            }
            let blockedUntil = try await store.confirmationsBlockedUntil(accountId: accountId, source: source)
            if blockedUntil > now {
                throw ManagerError(
                    .tooManyRequests, .tooManyRequests,
                    "a login to \(request.loginName) from here was denied a moment ago; try again in \((blockedUntil - now + 999) / 1000) s"
                )
            }
            let displaced = try await self.confirmationQueue.makeRoom(for: confirmation, of: accountId, in: store)
            var record = confirmation
            (record.accountId, record.hostName) = (accountId, host.name)
            try await store.insertConfirmation(record)
            return (accountId, displaced)
        }
        await wakeUps.wake(
            displaced.map { WakeUps.keys(confirmation: $0, account: accountId) } ?? [WakeUps.key(account: accountId)])
        logger.info(
            "confirmation started",
            metadata: [
                "confirmation": "\(confirmation.id)", "host": "\(request.hostId)", "loginName": "\(request.loginName)",
                "service": "\(request.service)",
            ])
        let start = ConfirmationStartMessage(
            nonce: request.nonce, confirmationId: confirmation.id, code: confirmation.code,
            payload: ConfirmationPayload.link(to: confirmation.id, at: managerURL),
            appLink: "\(managerURL)/c#\(confirmation.id)", waitToken: waitToken, issuedAt: now,
            expiresAt: confirmation.expiresAt
        )
        return try signer.sign(start, type: SignedAnswerType.confirmationStart)
    }

    /// A host's user is the account's only where it has the account's uid (served by the host's directory, or made
    /// with that number), or where the administrator let the account be the hosts' local user of its name (H5): a
    /// manager account named like a host's own user (`ubuntu`, a colleague's) must not log in as that user. A host
    /// that does not say (before this check existed) is believed only for an account so marked.
    static func checkLocalUser(
        _ request: ConfirmationRequest, of account: ManagerStore.LoginAccount, on host: String
    ) throws {
        guard !account.mapsLocalUser else { return }
        guard let local = request.localUid, local == account.uid else {
            throw ManagerError(
                .forbidden, .localUserMismatch,
                request.localUid.map {
                    "\(host)'s user \(request.loginName) (uid \($0)) is not the manager's \(request.loginName) (uid \(account.uid.map(String.init) ?? "none")); an administrator lets the account be the hosts' own users with `xign-manager admin accounts set-local-user EMAIL yes`"
                } ?? "\(host) did not say which uid its user \(request.loginName) has; update xign on it")
        }
    }

    /// The host gives up on its confirmation (its client went away), so no device approves a login nobody waits for.
    public func withdrawConfirmation(_ request: ConfirmationWithdrawalRequest) async throws -> ConfirmationStateMessage
    {
        let presented = Data(Self.hashed(request.waitToken).utf8)
        let (state, accountId) = try await database.transaction { store -> (ConfirmationState, String) in
            guard let record = try await store.confirmation(request.confirmationId),
                constantTimeEquals(Data(record.waitTokenHash.utf8), presented)
            else {
                throw ManagerError(.notFound, .notFound, "no such confirmation for this wait token")
            }
            let withdrawn = try await store.decideConfirmation(
                record.id, state: .withdrawn, approvedBy: nil, now: Self.now())
            return (withdrawn ? .withdrawn : record.state(at: Self.now()), record.accountId)
        }
        await wakeUps.wake(WakeUps.keys(confirmation: request.confirmationId, account: accountId))
        return ConfirmationStateMessage(confirmationId: request.confirmationId, state: state)
    }

    /// Answers the host with the decision once there is one, or with `pending` when the wait runs out.
    public func waitForConfirmation(_ request: ConfirmationWaitRequest) async throws -> String {
        let presented = Data(Self.hashed(request.waitToken).utf8)
        let isYours = { (record: ManagerStore.ConfirmationRecord) in
            constantTimeEquals(Data(record.waitTokenHash.utf8), presented)
        }
        let decidedOrNotYours = { (record: ManagerStore.ConfirmationRecord?) in
            record.map { !isYours($0) || $0.state(at: Self.now()) != .pending } ?? true
        }
        let expiry = { (record: ManagerStore.ConfirmationRecord?) in record?.expiresAt ?? 0 }
        let found = try await wakeUps.longPoll(
            request.waitMilliseconds, wakingOn: WakeUps.key(confirmation: request.confirmationId), keptUntil: expiry,
            until: decidedOrNotYours
        ) {
            try await self.database.read { store in try await store.confirmation(request.confirmationId) }
        }
        guard let record = found, isYours(record) else {
            throw ManagerError(.notFound, .notFound, "no such confirmation for this wait token")
        }
        let state = record.state(at: Self.now())
        let result = ConfirmationResultMessage(
            nonce: record.nonce, confirmationId: record.id, hostId: record.hostId, loginName: record.loginName,
            service: record.service,
            state: state, approvedBy: state == .approved ? record.approvedBy : nil,
            endedBecause: confirmations.ending(of: record, in: state)
        )
        return try signer.sign(result, type: SignedAnswerType.confirmationResult)
    }

    /// The confirmations waiting for the signing device's account; holds the answer while there are none.
    public func pendingConfirmations(body: Data, signature: String?) async throws -> String {
        let request = try RequestBody.decode(PendingConfirmationsRequest.self, from: body, "the request")
        let accountId = try await database.transaction { store -> String in
            try await self.verifier.verifyDeviceSignature(
                deviceId: request.deviceId, challenge: request.challenge, path: APIPath.confirmationsPending,
                body: body, signature: signature,
                in: store
            )
            guard let accountId = try await store.accountId(ofDevice: request.deviceId) else {
                throw ManagerError.internalFailure("device without account")
            }
            return accountId
        }
        let pending = try await wakeUps.waitForPendingConfirmations(of: accountId, upTo: request.waitMilliseconds) {
            !$0.isEmpty
        }
        let list = ConfirmationListMessage(
            nonce: request.nonce,
            confirmations: pending.map(\.pendingMessage))
        return try signer.sign(list, type: SignedAnswerType.confirmationList)
    }

    /// The user refuses a confirmation from an enrolled device; its source (host and remote address) gets a cool-down,
    /// not the account, so a denied stranger does not lock the user out too.
    public func denyConfirmation(body: Data, signature: String?) async throws -> ConfirmationStateMessage {
        let request = try RequestBody.decode(ConfirmationDenialRequest.self, from: body, "the denial")
        let cooldown = configuration.confirmation.denialCooldownMilliseconds
        let accountId = try await database.transaction { store -> String in
            try await self.verifier.verifyDeviceSignature(
                deviceId: request.deviceId, challenge: request.challenge, path: APIPath.confirmationDenial, body: body,
                signature: signature,
                in: store
            )
            let now = Self.now()
            guard let confirmation = try await store.confirmation(request.confirmationId),
                confirmation.accountId == (try await store.accountId(ofDevice: request.deviceId)),
                try await store.decideConfirmation(confirmation.id, state: .denied, approvedBy: nil, now: now)
            else {
                throw ManagerError(
                    .conflict, .sessionInvalid,
                    "the confirmation is unknown, decided already, expired, or not for your account")
            }
            try await store.blockConfirmations(
                accountId: confirmation.accountId, source: confirmation.source, until: now + cooldown)
            return confirmation.accountId
        }
        await wakeUps.wake(WakeUps.keys(confirmation: request.confirmationId, account: accountId))
        logger.notice(
            "confirmation denied",
            metadata: ["confirmation": "\(request.confirmationId)", "device": "\(request.deviceId)"])
        return ConfirmationStateMessage(confirmationId: request.confirmationId, state: .denied)
    }
}
