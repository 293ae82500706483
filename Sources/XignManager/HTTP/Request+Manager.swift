import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import XignProtocol

extension Request {
    /// The body, refused past `IdentityManager.maximumBodySize`.
    func collectBody() async throws -> Data {
        do {
            return Data(buffer: try await body.collect(upTo: IdentityManager.maximumBodySize))
        } catch {
            throw ManagerError(
                .contentTooLarge, .payloadTooLarge,
                "request body is larger than \(IdentityManager.maximumBodySize) bytes")
        }
    }

    /// The body decoded as `T` the way a signed body is (`RequestBody.decode`), or badRequest.
    func decodeBody<T: Decodable & LimitedMessage>(as type: T.Type = T.self) async throws -> T {
        try RequestBody.decode(T.self, from: try await collectBody(), "the request body")
    }

    /// The signature header of a device- or host-signed request.
    var signatureHeader: String? { headers[Self.signatureField] }

    private static let signatureField = HTTPField.Name(SignedRequest.signatureHeader)!
}

extension Response {
    static func json(_ status: HTTPResponse.Status, _ value: some Encodable) throws -> Response {
        let data = try JSONEncoder.canonical.encode(value)
        return Response(
            status: status, headers: [.contentType: "application/json", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// A compact JWS (`application/jose`): the answers that change trust.
    static func jose(_ compact: String) -> Response {
        Response(
            status: .ok, headers: [.contentType: "application/jose", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: compact)))
    }
}
