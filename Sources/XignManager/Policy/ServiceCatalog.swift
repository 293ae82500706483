import XignManagerConfiguration
import XignProtocol

/// The service an authentication's purpose is for: a configured one that a login names, or the one built in for
/// each process (device and PIN, no attributes), whose name the audit shows.
struct ServiceCatalog: Sendable {
    let configured: [ManagerConfiguration.Service]

    /// How long an api access grant holds.
    static let apiAccessGrantMilliseconds: Int64 = 300_000

    func service(for purpose: AuthenticationPurpose) throws -> ManagerConfiguration.Service {
        switch purpose {
        case .login(let id):
            guard let service = configured.first(where: { $0.id == id }) else {
                throw ManagerError(
                    .notFound, .notFound,
                    "the manager has no service '\(id.prefix(64))'; check service= in the PAM configuration")
            }
            return service
        case .confirmation: return Self.builtIn("confirm", "Login confirmation")
        case .merge: return Self.builtIn("merge", "Account merge")
        case .apiAccess(let process):
            let lifetime = Self.apiAccessGrantMilliseconds
            switch process {
            case .changePin: return Self.builtIn("change-pin", "Change PIN", lifetime: lifetime)
            case .requestNewActivation: return Self.builtIn("new-activation", "New activation", lifetime: lifetime)
            case .delete: return Self.builtIn("delete", "Delete account", lifetime: lifetime)
            case .addFactor: return Self.builtIn("add-factor", "Add factor", lifetime: lifetime)
            case .revokeDevice: return Self.builtIn("revoke-device", "Remove a device", lifetime: lifetime)
            case .console: return Self.builtIn("console", "Administrator's console", lifetime: lifetime)
            }
        }
    }

    private static func builtIn(_ id: String, _ name: String, lifetime: Int64 = 60_000) -> ManagerConfiguration.Service
    {
        ManagerConfiguration.Service(
            id: id, relyingPartyName: name, roles: [RoleMessage(name: id, requestedAuthenticators: [[.device, .pin]])],
            attributes: [], tokenLifetimeMilliseconds: lifetime)
    }
}
