import Foundation
import Testing

@testable import XignLogin

/// Where logind put a process, read as systemd reads it (H2). The real cgroups and the real sudo are in
/// PAMRemoteLoginTests; this pins the rule on the file's text, line by line.
@Suite struct SystemdPlacementTests {
    static func placement(_ text: String) -> SystemdPlacement? { SystemdPlacement(cgroupFile: Data(text.utf8)) }

    @Test func aSessionScopeCountsOnlyInItsOwnUsersSlice() {
        #expect(Self.placement("0::/user.slice/user-1001.slice/session-c1.scope\n") == .session(id: "c1", uid: 1001))
        #expect(
            Self.placement("0::/user.slice/user-1001.slice/user@1001.service/app.slice/app-gnome-terminal.scope\n")
                == .userManager(uid: 1001))
        for forged in [
            // Made by the user below their own service manager: systemd reads these as that service manager's.
            "user.slice/user-1001.slice/user@1001.service/app.slice/session-c1.scope",
            "user.slice/user-1001.slice/user@1001.service/app.slice/user@1002.service",
        ] {
            #expect(Self.placement("0::/\(forged)\n") == .userManager(uid: 1001), "\(forged)")
        }
        for nowhere in [
            "/", "/system.slice/cron.service", "/user.slice/session-c1.scope",
            "/user.slice/user-1001.slice/session-c1.scope/inner", "/user.slice/user-1001.slice/user@1002.service",
            "/machine.slice/user.slice/user-1001.slice/session-c1.scope", "/user.slice/user-x.slice/session-c1.scope",
            "/user.slice/user-1001.slice/session-c-1.scope", "/user.slice/user-99999999999.slice/session-c1.scope",
        ] {
            #expect(Self.placement("0::\(nowhere)\n") == nil, "\(nowhere)")
        }
    }

    @Test func onAHybridMachineBothHierarchiesMustAgree() {
        let named = "1:name=systemd:/user.slice/user-1001.slice/session-c1.scope\n"
        #expect(Self.placement(named + "0::/\n") == .session(id: "c1", uid: 1001), "an unused v2 tree")
        #expect(
            Self.placement(named + "0::/user.slice/user-1001.slice/session-c1.scope\n")
                == .session(id: "c1", uid: 1001))
        #expect(
            Self.placement(named + "0::/user.slice/user-1001.slice/user@1001.service/app.slice/x.scope\n") == nil,
            "moved in one hierarchy only")
    }
}
