import Foundation
import Hummingbird
import HummingbirdTesting
import Testing
import XignCrypto
import XignProtocol
import XignTestSupport

/// G8–G10: a cross-site POST without a preflight, a page of another origin, two session cookies; and what every answer
/// says back. Each refusal beside the request the manager's own page sends. The middleware's answers are checked in
/// this process; the session cookies with raw HTTP against a manager process, so that each header line is what a
/// browser sends.
@Suite(.machineShare) struct BrowserBoundaryTests {
    static func raw(
        _ manager: ManagerProcess, _ method: String, _ path: String, headers: [String] = [], body: String = ""
    ) throws -> String {
        let request =
            "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(manager.port)\r\n" + headers.map { $0 + "\r\n" }.joined()
            + (body.isEmpty && method == "GET" ? "" : "Content-Length: \(body.utf8.count)\r\n")
            + "Connection: close\r\n\r\n" + body
        return try #require(LoopbackSocket.exchange(request, port: manager.port, from: "127.0.0.1"))
    }

    static func status(_ answer: String) -> Int { Int(answer.split(separator: " ").dropFirst().first ?? "") ?? 0 }

    static func header(_ name: String, in answer: String) -> String? {
        let head = answer.components(separatedBy: "\r\n\r\n").first ?? ""
        return head.split(separator: "\r\n").first { $0.lowercased().hasPrefix(name.lowercased() + ":") }
            .map { String($0.dropFirst(name.count + 1)).trimmingCharacters(in: .whitespaces) }
    }

    /// In this process (`InProcessManager`): the middleware's answers need no socket.
    @Test func aCrossSitePostOrAnotherOriginIsRefusedAndEveryAnswerSaysNosniff() async throws {
        try await InProcessManager.run { manager in
            let body = #"{"deviceId":"no-such-device"}"#
            // What a form or another site's fetch sends without a preflight.
            for type in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"] {
                let answer = try await manager.execute(
                    .post, APIPath.challenges, headers: [.contentType: type], body: body)
                #expect(answer.status == .unsupportedMediaType, "\(type): \(answer.status)")
                #expect(answer.headers[.xContentTypeOptions] == "nosniff")
            }
            let untyped = try await manager.execute(.post, APIPath.challenges, body: body)
            #expect(untyped.status == .unsupportedMediaType, "a body without a type")
            // Control: JSON reaches the route, which knows no such device.
            let json = try await manager.execute(
                .post, APIPath.challenges, headers: [.contentType: "application/json; charset=utf-8"], body: body)
            #expect(json.status == .notFound, "\(String(buffer: json.body))")
            #expect(json.headers[.xContentTypeOptions] == "nosniff")

            // A page of another origin, and the manager's own.
            let foreign = try await manager.execute(
                .post, APIPath.challenges,
                headers: [.contentType: "application/json", .origin: "https://evil.example"],
                body: body)
            #expect(foreign.status == .forbidden)
            #expect(String(buffer: foreign.body).contains("may not call this manager"))
            let sandboxed = try await manager.execute(.get, APIPath.health, headers: [.origin: "null"])
            #expect(sandboxed.status == .forbidden, "a sandboxed frame or a file")
            let own = try await manager.execute(
                .post, APIPath.challenges, headers: [.contentType: "application/json", .origin: manager.origin],
                body: body)
            #expect(own.status == .notFound, "\(String(buffer: own.body))")

            // Every answer: a page, the API, the router's own 404.
            for path in [APIPath.health, "/c", "/no/such/path"] {
                let answer = try await manager.execute(.get, path)
                #expect(answer.headers[.xContentTypeOptions] == "nosniff", "\(path)")
                #expect(answer.headers[.strictTransportSecurity] == nil, "not on a plain-HTTP public URL")
            }
        }
    }

    /// Behind a balancer that ends TLS, the manager's public URL is https: its answers ask browsers to stay on https.
    @Test func anHTTPSPublicURLSendsHSTS() async throws {
        let config = ManagerProcess.testConfig + "\n[server]\npublic_url = https://idm.example.org\n"
        try await InProcessManager.run(config: config) { manager in
            for path in [APIPath.health, "/c", "/account"] {
                let answer = try await manager.execute(.get, path)
                #expect(answer.headers[.strictTransportSecurity] == "max-age=31536000", "\(path)")
            }
        }
    }

    @Test func theSessionCookieIsHostOnlyAndTwoAreRefused() async throws {
        let api = API(manager: try ManagerProcess())
        let device = try await api.enrolDevice("alice@example.org")
        let challenge = try #require(
            try await api.post(APIPath.challenges, ChallengeRequest(deviceId: device.id)).json["challenge"] as? String)
        let body = try JSONEncoder.canonical.encode(
            WebSessionRequest(deviceId: device.id, challenge: challenge, nonce: "w"))
        let message = SignedRequest.canonicalMessage(
            method: "POST", path: APIPath.webSessions, body: body, challenge: challenge)
        let opened = try Self.raw(
            api.manager, "POST", APIPath.webSessions,
            headers: [
                "Content-Type: application/json",
                "\(SignedRequest.signatureHeader): \(Base64URL.encode(try device.key.signature(for: message)))",
            ],
            body: String(decoding: body, as: UTF8.self))
        #expect(Self.status(opened) == 201, "\(opened)")
        let cookie = try #require(Self.header("Set-Cookie", in: opened))
        #expect(cookie.hasPrefix("__Host-xign-session="))
        #expect(
            cookie.contains("; Path=/;") && cookie.contains("Secure") && cookie.contains("HttpOnly")
                && !cookie.contains("Domain"), "\(cookie)")
        let token = String(cookie.dropFirst("__Host-xign-session=".count).prefix { $0 != ";" })
        let json = ["Content-Type: application/json"]
        let mine = try Self.raw(
            api.manager, "POST", APIPath.webDevices, headers: json + ["Cookie: __Host-xign-session=\(token)"],
            body: "{}")
        #expect(Self.status(mine) == 200, "control: the session alone: \(mine)")
        for planted in [
            "Cookie: __Host-xign-session=planted; __Host-xign-session=\(token)",
            "Cookie: __Host-xign-session=\(token)\r\nCookie: __Host-xign-session=planted",
        ] {
            let two = try Self.raw(api.manager, "POST", APIPath.webDevices, headers: json + [planted], body: "{}")
            #expect(Self.status(two) == 400, "\(two)")
            #expect(two.contains("two sessions"))
        }
    }
}
