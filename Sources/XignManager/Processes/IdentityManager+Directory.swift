import Foundation
import XignProtocol

/// Users on every machine: a joined host fetches the accounts that may log in to it, with their uids and local groups,
/// signed over its nonce; or one of them, for a name or number its cache missed. The host serves them through its NSS module (docs/design.md, "Users on every machine").
extension IdentityManager {
    public func hostDirectory(body: Data, signature: String?) async throws -> String {
        let request = try RequestBody.decode(HostDirectoryRequest.self, from: body, "the directory request")
        let raw = try RequestVerifier.signature(from: signature)
        let users = try await database.transaction(durability: .unsynced) { store -> [DirectoryUser] in
            guard let host = try await store.host(id: request.hostId) else { throw Self.unknownHost }
            try RequestVerifier.checkSignature(
                raw, by: host.publicKey, of: .host, path: APIPath.hostDirectory, body: body,
                challenge: request.challenge)
            guard try await store.consumeHostChallenge(request.challenge, hostId: host.id, now: Self.now()) else {
                throw ManagerError(
                    .conflict, .challengeInvalid,
                    "the challenge is unknown, expired or was already used; request a new one")
            }
            return try await store.directory(hostName: host.name, loginName: request.loginName, uid: request.uid)
        }
        logger.debug("directory served", metadata: ["host": "\(request.hostId)", "users": "\(users.count)"])
        return try signer.sign(
            HostDirectory(nonce: request.nonce, hostId: request.hostId, issuedAt: Self.now(), users: users),
            type: SignedAnswerType.hostDirectory)
    }
}
