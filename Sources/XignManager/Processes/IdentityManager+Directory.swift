import Foundation
import XignProtocol

/// Users on every machine: a joined host fetches the accounts that may log in to it, with their uids and local groups,
/// signed over its nonce; or one of them, for a name or number its cache missed. The host serves them through its NSS module (docs/design.md, "Users on every machine").
extension IdentityManager {
    public func hostDirectory(body: Data, signature: String?) async throws -> String {
        let request = try RequestBody.decode(HostDirectoryRequest.self, from: body, "the directory request")
        let raw = try RequestVerifier.signature(from: signature)
        let (users, policies) = try await database.transaction(durability: .unsynced) {
            store -> ([DirectoryUser], [String: SudoPolicy]) in
            let host = try await self.signingHost(
                id: request.hostId, signature: raw, path: APIPath.hostDirectory, body: body,
                challenge: request.challenge, in: store)
            return (
                try await store.directory(hostName: host.name, loginName: request.loginName, uid: request.uid),
                try await store.sudoPolicies(hostName: host.name)
            )
        }
        logger.debug("directory served", metadata: ["host": "\(request.hostId)", "users": "\(users.count)"])
        return try signer.sign(
            HostDirectory(
                nonce: request.nonce, hostId: request.hostId, issuedAt: Self.now(), users: users, sudoPolicies: policies
            ),
            type: SignedAnswerType.hostDirectory)
    }
}
