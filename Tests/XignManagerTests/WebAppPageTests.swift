import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing
import XignProtocol

/// The web app's pages and files as served, in this process (`InProcessManager`); what they do in a browser is
/// WebAppTests'.
@Suite struct WebAppPageTests {
    /// Every page and file carries the strict headers; the secrets stay in the fragment, which no request carries.
    @Test func pagesAndFilesCarryStrictHeaders() async throws {
        try await InProcessManager.run { manager in
            for path in ["/link/personalize", "/c", "/web/app.js", "/web/app.css"] {
                let answer = try await manager.execute(.get, path)
                #expect(answer.status == .ok, "\(path)")
                let policy = answer.headers[.contentSecurityPolicy] ?? ""
                #expect(policy.contains("script-src 'self'") && policy.contains("frame-ancestors 'none'"), "\(path)")
                #expect(!policy.contains("unsafe-inline"), "\(path)")
                #expect(answer.headers[HTTPField.Name("Referrer-Policy")!] == "no-referrer", "\(path)")
                #expect(answer.headers[.xContentTypeOptions] == "nosniff", "\(path)")
                #expect(answer.headers[.cacheControl] == "no-store", "\(path)")
            }
            // The pages name this version of the files, which a browser may keep; nothing personal is in them.
            let page = String(buffer: try await manager.execute(.get, "/c").body)
            for file in ["/web/app.js", "/web/app.css"] {
                let named = try #require(page.firstMatch(of: try Regex("\(file)\\?v=([0-9a-f]+)"))?.output[1].substring)
                let kept = try await manager.execute(.get, "\(file)?v=\(named)")
                #expect(kept.headers[.cacheControl] == "public, max-age=31536000, immutable", "\(file)")
                let other = try await manager.execute(.get, "\(file)?v=0\(named)")
                #expect(other.headers[.cacheControl] == "no-store", "another version is not kept: \(file)")
            }
            #expect(!page.contains("<script>") && !page.contains("style="), "no inline script or style")
            #expect(
                page.contains("<label for=\"code\">") && page.contains("<label for=\"pin\">"),
                "every input has its label")
        }
    }

    /// The script states no API path of its own: every page hands it `APIPath`'s, and every name it calls is one of
    /// them.
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
