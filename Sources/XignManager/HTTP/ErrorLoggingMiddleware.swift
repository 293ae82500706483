import Hummingbird
import Logging

/// The one place errors are logged: a manager error of the 5xx kind with its message, anything else in full.
/// The client gets `ManagerError`'s own answer, and `internalError` for the rest, with no details.
struct ErrorLoggingMiddleware<Context: RequestContext>: RouterMiddleware {
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as ManagerError {
            if error.status.code >= 500 { logger.error("\(error.detail.message)") }
            throw error
        } catch {
            logger.error("request failed: \(error)")
            throw ManagerError.unexpected
        }
    }
}
