import HTTPTypes
import Hummingbird
import XignProtocol

/// An error the API answers with: a status and the JSON error body. It writes its own answer
/// (`HTTPResponseError`); `ErrorLoggingMiddleware` turns every other error into `internalError`.
public struct ManagerError: HTTPResponseError, CustomStringConvertible {
    public let status: HTTPResponse.Status
    public let detail: ErrorBody.Detail

    public var description: String { detail.message }

    init(_ status: HTTPResponse.Status, _ code: WireErrorCode, _ message: String, attributes: [String: AttributeErrorCode]? = nil,
         pinError: String? = nil, lockout: LockoutMessage? = nil, authenticationAttributes: [String: AuthenticationAttributeErrorCode]? = nil) {
        self.status = status
        self.detail = ErrorBody.Detail(
            code: code, message: message, attributes: attributes, pinError: pinError, lockout: lockout, authenticationAttributes: authenticationAttributes
        )
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        try .json(status, ErrorBody(detail))
    }

    static func badRequest(_ message: String) -> ManagerError { ManagerError(.badRequest, .badRequest, message) }
    static func internalFailure(_ message: String) -> ManagerError { ManagerError(.internalServerError, .internalError, message) }

    /// What a client sees of a failure whose details belong in the log only.
    static let unexpected = ManagerError(.internalServerError, .internalError, "internal error; the manager's log has the details")

    static func lockedOut(_ lock: LockoutMessage) -> ManagerError {
        ManagerError(
            HTTPResponse.Status(code: 423, reasonPhrase: "Locked"), .lockedOut,
            lock.isPermanent
                ? "This activation is locked permanently after too many wrong PINs. Register again or ask your administrator."
                : "This activation is locked after a wrong PIN. Try again after the time given in lockedUntil.",
            lockout: lock
        )
    }
}
