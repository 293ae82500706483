import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

/// schemathesis's "undeclared method" check, in this process (`InProcessManager`): a path of the API asked with another
/// method answers 405 and names the one it takes, for every path and method in docs/openapi.yaml.
@Suite struct MethodTests {
    @Test func everyPathAnswersOtherMethodsWith405AndAllow() async throws {
        let paths = try #require(try APISpec.openAPI.get().document["paths"] as? [String: [String: Any]])
        #expect(paths.count == 42)
        let declaredMethods = paths.mapValues { Set($0.keys.map { $0.uppercased() }) }
        try await InProcessManager.run { manager in
            for (path, declared) in declaredMethods {
                #expect(declared.count == 1, "\(path)")
                for method in ["GET", "POST", "PUT", "DELETE", "PATCH", "TRACE", "OPTIONS"]
                where !declared.contains(method) {
                    let answer = try await manager.execute(try #require(HTTPRequest.Method(method)), path)
                    #expect(answer.status == .methodNotAllowed, "\(method) \(path): \(answer.status)")
                    #expect(answer.headers[.allow] == declared.first, "\(method) \(path): \(answer.headers)")
                }
            }
        }
    }
}
