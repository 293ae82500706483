import XignProtocol

/// Who may act on whom (docs/security.md, H4). The command line is root on the manager and acts as an administrator
/// does. A helpdesk acts only on accounts that hold no role, and lifts only a lock a helpdesk set: it cannot lock an
/// administrator out, clear an administrator's PIN lockout again and again (with that administrator's device, an
/// unlimited PIN search), nor mail one new activation data. And no change, whoever makes it, leaves the manager
/// without an unlocked administrator: only an administrator gives roles in the console.
struct RoleRules: Sendable {
    /// The role of whoever acts; nil for the command line.
    let actor: ConsoleRole?

    enum Change {
        case lock, unlock, delete, other
        case setRole(ConsoleRole?)
    }

    /// The role a lock by this actor carries.
    var lockingRole: ConsoleRole { actor == .helpdesk ? .helpdesk : .admin }

    /// Refuses `change` of `target` where the actor may not make it, or where it would leave no unlocked administrator.
    func check(_ change: Change, of target: ManagerStore.ConsoleAccount, in store: ManagerStore) async throws {
        if actor == .helpdesk {
            guard target.role == nil else {
                throw ManagerError(
                    .forbidden, .securityInsufficient,
                    "\(target.email) holds the \(target.role?.rawValue ?? "") role, and a helpdesk acts only on accounts without one; ask an administrator"
                )
            }
            if case .unlock = change, target.lockedAt != nil, target.lockedByRole != .helpdesk {
                throw ManagerError(
                    .forbidden, .securityInsufficient,
                    "an administrator locked \(target.email), and only an administrator lifts that lock")
            }
        }
        guard target.role == .admin, target.lockedAt == nil else { return }
        switch change {
        case .lock, .delete: break
        case .setRole(let role) where role != .admin: break
        default: return
        }
        guard try await store.unlockedAdministrators(except: target.id) > 0 else {
            throw ManagerError(
                .conflict, .conflict,
                "\(target.email) is the last unlocked administrator; give another account the admin role first (xign-manager admin accounts set-role EMAIL admin)"
            )
        }
    }
}
