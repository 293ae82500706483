import Hummingbird
import Logging
import PostgresNIO

/// The one place errors are logged: a manager error of the 5xx kind with its message, anything else in full.
/// The client gets `ManagerError`'s own answer, and `internalError` for the rest, with no details.
struct ErrorLoggingMiddleware<Context: RequestContext>: RouterMiddleware {
    let logger: Logger

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as ManagerError {
            if error.status.code >= 500 { logger.error("\(error.detail.message)") }
            throw error
        } catch let error as HTTPError where error.status.code < 500 {
            // The router's own refusals (no such route, wrong method) are the client's mistake, answered in the API's shape.
            throw ManagerError(
                error.status, error.status == .notFound ? .notFound : .badRequest,
                "\(request.method) \(request.uri.path.prefix(200)) is not part of the manager's API (\(error.status.code))"
            )
        } catch let error as PSQLError {
            if let answer = PostgreSQLPool.unavailable(error) {
                // A failover, PostgreSQL restarting, or a call its watchdog cut: busy, try again.
                logger.warning(
                    "request failed: PostgreSQL \(error.serverInfo?[.sqlState] ?? String(describing: error.code)): \(answer.detail.message)"
                )
                throw answer
            }
            // PostgresNIO's description hides the server's words; the code and message are what an admin needs.
            logger.error(
                "request failed: PostgreSQL \(error.serverInfo?[.sqlState] ?? "-"): \(error.serverInfo?[.message] ?? String(describing: error.code))"
            )
            throw ManagerError.unexpected
        } catch {
            logger.error("request failed: \(error)")
            throw ManagerError.unexpected
        }
    }
}
