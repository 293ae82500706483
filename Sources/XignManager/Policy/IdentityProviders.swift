import Foundation
import NIOPosix
import XignIdentityProviders
import XignManagerConfiguration
import XignProtocol

/// The configured identity providers, with their client secrets read once, and the threads their calls run on: two
/// of their own, so a provider that is slow or down never holds the threads SQLite and the PIN checks use.
final class IdentityProviders: Sendable {
    let settings: [IdentityProviderSettings]
    let defaultId: String?
    private let secrets: [String: String]
    private let threads: NIOThreadPool

    init(_ configuration: ManagerConfiguration) throws {
        settings = configuration.identityProviders
        defaultId = configuration.defaultIdentityProvider
        var secrets: [String: String] = [:]
        for provider in settings {
            guard let path = provider.secretFile else { continue }
            secrets[provider.id] = try Self.secret(at: path, provider: provider.id)
        }
        self.secrets = secrets
        threads = NIOThreadPool(numberOfThreads: 2)
        if !settings.isEmpty { threads.start() }
    }

    deinit { if !settings.isEmpty { try? threads.syncShutdownGracefully() } }

    /// The provider `id` names (nil: the default), or the error that lists the ones there are.
    func provider(_ id: String?) throws -> IdentityProviderSettings {
        guard let id = id ?? defaultId, let provider = settings.first(where: { $0.id == id }) else {
            throw ManagerError(
                .notFound, .notFound,
                settings.isEmpty
                    ? "this manager registers through no identity provider; register with your email address"
                    : "no identity provider '\(id?.prefix(64) ?? "")'; this manager has \(settings.map(\.id).joined(separator: ", "))"
            )
        }
        return provider
    }

    /// The OpenID Connect client of a browser provider; nil for a custom one.
    func openID(_ provider: IdentityProviderSettings, redirectURI: String) -> OpenIDProvider? {
        guard case .openID(let issuer, let clientId, let scopes) = provider.kind else { return nil }
        return OpenIDProvider(
            settings: OpenIDProvider.Settings(
                issuer: issuer, clientId: clientId, clientSecret: secrets[provider.id], scopes: scopes,
                redirectURI: redirectURI))
    }

    /// The endpoint of a custom provider; nil for a browser one.
    func custom(_ provider: IdentityProviderSettings) -> CustomProvider? {
        guard case .custom(let endpoint, _) = provider.kind else { return nil }
        return CustomProvider(endpoint: endpoint, token: secrets[provider.id])
    }

    /// Runs a blocking call to a provider on the providers' own threads.
    func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await threads.runIfActive(work)
    }

    private static func secret(at path: String, provider: String) throws -> String {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw ManagerError.internalFailure(
                "identity_provider.\(provider)'s secret file \(path) cannot be read: \(String(cString: strerror(errno)))"
            )
        }
        guard info.st_mode & 0o077 == 0 else {
            throw ManagerError.internalFailure(
                "identity_provider.\(provider)'s secret file \(path) may be read by others; chmod 600 it")
        }
        guard let data = FileManager.default.contents(atPath: path), data.count <= 4096,
            let text = String(data: data, encoding: .utf8)?.trimmingCharacters(in: .whitespacesAndNewlines),
            !text.isEmpty
        else {
            throw ManagerError.internalFailure(
                "identity_provider.\(provider)'s secret file \(path) holds no secret")
        }
        return text
    }
}
