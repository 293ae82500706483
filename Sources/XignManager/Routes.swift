import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import XignProtocol

/// HTTP for the identity manager: each route reads a size-limited body, calls IdentityManager and writes JSON,
/// or a JWS (`application/jose`) for answers that change trust.
public enum ManagerRoutes {
    public static func router(for manager: IdentityManager) -> Router<BasicRequestContext> {
        let router = Router()
        router.get(RouterPath(APIPath.health)) { _, _ in
            try json(.ok, manager.health())
        }
        router.get(RouterPath(APIPath.registrationParameters)) { request, _ in
            try await answer(manager.logger) {
                let mapping = request.uri.queryParameters["serviceMappingId"].map(String.init)
                guard (mapping?.utf8.count ?? 0) <= 64 else { throw ManagerError.badRequest("serviceMappingId is too long") }
                return try json(.ok, manager.registrationParameters(serviceMappingId: mapping))
            }
        }
        router.post(RouterPath(APIPath.registrations)) { request, _ in
            try await answer(manager.logger) {
                let body: RegisterRequest = try decode(try await collect(request))
                return try json(.created, try await manager.register(body))
            }
        }
        router.post(RouterPath(APIPath.personalizationDecrypt)) { request, _ in
            try await answer(manager.logger) {
                let body: DecryptRequest = try decode(try await collect(request))
                return jose(try await manager.decrypt(body))
            }
        }
        router.post(RouterPath(APIPath.personalizations)) { request, _ in
            try await answer(manager.logger) {
                let body = try await collect(request)
                return jose(try await manager.personalize(body: body, signature: request.headers[signatureField]))
            }
        }
        router.post(RouterPath(APIPath.challenges)) { request, _ in
            try await answer(manager.logger) {
                let body: ChallengeRequest = try decode(try await collect(request))
                return try json(.created, try await manager.challenge(for: body))
            }
        }
        router.post(RouterPath(APIPath.deviceRevocations)) { request, _ in
            try await answer(manager.logger) {
                let body = try await collect(request)
                return jose(try await manager.revoke(body: body, signature: request.headers[signatureField]))
            }
        }
        router.post(RouterPath(APIPath.authentications)) { request, _ in
            try await answer(manager.logger) {
                let body: AuthenticationStartRequest = try decode(try await collect(request))
                return jose(try await manager.startAuthentication(body))
            }
        }
        router.post(RouterPath(APIPath.authenticationFinish)) { request, _ in
            try await answer(manager.logger) {
                let body = try await collect(request)
                return jose(try await manager.finishAuthentication(body: body, signature: request.headers[signatureField]))
            }
        }
        router.post(RouterPath(APIPath.token)) { request, _ in
            try await answer(manager.logger) {
                let body: TokenRequest = try decode(try await collect(request))
                return jose(try await manager.token(body))
            }
        }
        return router
    }

    static let signatureField = HTTPField.Name(SignedRequest.signatureHeader)!

    static func collect(_ request: Request) async throws -> Data {
        do {
            return Data(buffer: try await request.body.collect(upTo: IdentityManager.maximumBodySize))
        } catch {
            throw ManagerError(.contentTooLarge, .payloadTooLarge, "request body is larger than \(IdentityManager.maximumBodySize) bytes")
        }
    }

    static func decode<T: Decodable>(_ body: Data) throws -> T {
        do { return try JSONDecoder().decode(T.self, from: body) } catch {
            throw ManagerError.badRequest("the request body is not valid JSON of the expected shape")
        }
    }

    static func json(_ status: HTTPResponse.Status, _ value: some Encodable) throws -> Response {
        let data = try JSONEncoder.canonical.encode(value)
        return Response(
            status: status, headers: [.contentType: "application/json", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: data))
        )
    }

    static func jose(_ compact: String) -> Response {
        Response(
            status: .ok, headers: [.contentType: "application/jose", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: compact))
        )
    }

    /// Runs a handler and turns every error into the JSON error model; internal details go to the log only.
    static func answer(_ logger: Logger, _ body: () async throws -> Response) async throws -> Response {
        do {
            return try await body()
        } catch let error as ManagerError {
            if error.status.code >= 500 { logger.error("\(error.detail.message)") }
            return try json(error.status, ErrorBody(error.detail))
        } catch {
            logger.error("request failed: \(error)")
            return try json(.internalServerError, ErrorBody(.init(code: .internalError, message: "internal error; the manager's log has the details")))
        }
    }
}
