import HTTPTypes
import Hummingbird
import XignProtocol

/// An error the API answers with: a status and the JSON error body. It writes its own answer
/// (`HTTPResponseError`); `ErrorLoggingMiddleware` turns every other error into `internalError`.
public struct ManagerError: HTTPResponseError, CustomStringConvertible {
    public let status: HTTPResponse.Status
    public let detail: ErrorBody.Detail
    /// 429: when to try again, sent as Retry-After.
    var retryAfterSeconds: Int64?
    /// 405: the method the path takes, sent as Allow.
    var allow: HTTPRequest.Method?

    public var description: String { detail.message }

    init(
        _ status: HTTPResponse.Status, _ code: WireErrorCode, _ message: String,
        attributes: [String: AttributeErrorCode]? = nil,
        pinError: String? = nil, lockout: LockoutMessage? = nil,
        authenticationAttributes: [String: AuthenticationAttributeErrorCode]? = nil
    ) {
        self.status = status
        self.detail = ErrorBody.Detail(
            code: code, message: message, attributes: attributes, pinError: pinError, lockout: lockout,
            authenticationAttributes: authenticationAttributes
        )
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var response = try Response.json(status, ErrorBody(detail))
        if let retryAfterSeconds { response.headers[.retryAfter] = String(retryAfterSeconds) }
        if let allow { response.headers[.allow] = allow.rawValue }
        return response
    }

    static func badRequest(_ message: String) -> ManagerError { ManagerError(.badRequest, .badRequest, message) }
    static func internalFailure(_ message: String) -> ManagerError {
        ManagerError(.internalServerError, .internalError, message)
    }

    /// What a client sees of a failure whose details belong in the log only.
    static let unexpected = ManagerError(
        .internalServerError, .internalError, "internal error; the manager's log has the details")

    static func tooManyRequests(retryAfterMilliseconds: Int64) -> ManagerError {
        let seconds = max(1, (retryAfterMilliseconds + 999) / 1000)
        var error = ManagerError(
            .tooManyRequests, .tooManyRequests,
            "too many requests from this address or for this account; try again in \(seconds) s")
        error.retryAfterSeconds = seconds
        return error
    }

    /// An administrator locked the account: no PIN is asked for, and no wrong PIN is counted.
    static let accountLocked = ManagerError(
        HTTPResponse.Status(code: 423, reasonPhrase: "Locked"), .accountLocked,
        "an administrator locked this account; ask them to unlock it"
    )

    static let registrationClosed = ManagerError(
        .forbidden, .registrationClosed,
        "this manager does not take registrations; ask your administrator for an account"
    )

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
