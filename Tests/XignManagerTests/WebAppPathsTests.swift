import Foundation
import Hummingbird
import HummingbirdTesting
import Testing
import XignProtocol

/// The script states no API path of its own: every page hands it `APIPath`'s, and every name it calls is one of them.
/// In this process (`InProcessManager`).
@Suite struct WebAppPathsTests {
    @Test func everyPageHandsTheScriptTheAPIPathsItCalls() async throws {
        try await InProcessManager.run { manager in
            let script = String(buffer: try await manager.execute(.get, "/web/app.js").body)
            let called = Set(
                script.matches(of: /\bapi\.([A-Za-z]+)/).map { String($0.1) })
            #expect(!called.isEmpty && called.isSubset(of: Set(APIPath.calledByTheWebApp.keys)), "\(called)")
            #expect(script.firstMatch(of: /"\/v1\/|"\/health"/) == nil, "a path written into the script")
            for page in ["/c", "/link/personalize", "/account"] {
                let html = String(buffer: try await manager.execute(.get, page).body)
                let attribute = try #require(html.firstMatch(of: /data-api="([^"]*)"/)?.1, "\(page)")
                let json = String(attribute).replacingOccurrences(of: "&quot;", with: "\"")
                let paths = try JSONDecoder().decode([String: String].self, from: Data(json.utf8))
                #expect(paths == APIPath.calledByTheWebApp, "\(page)")
            }
        }
    }
}
