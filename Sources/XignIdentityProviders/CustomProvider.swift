import Foundation
import XignCore
import XignProtocol

/// OneWelcome's custom API identity provider: an endpoint of the organization's that receives a registration's
/// data (what the person typed) in one step, or two (an init step first), and answers accept with the person's
/// claims, refuse with a reason, or, after the init step, continue with what to ask for next. The manager names
/// itself with a bearer token when one is configured. Blocking with hard timeouts, like `OpenIDProvider`.
public struct CustomProvider: Sendable {
    public enum Step: String, Codable, Sendable { case `init`, finish }

    /// What the endpoint answered.
    public enum Answer: Sendable, Equatable {
        case accepted(claims: [String: [String]], info: String?)
        case refused(String)
        /// After the init step: the text for the person, before the finish step.
        case continued(info: String?)
    }

    let endpoint: ManagerURL
    let token: String?
    let http: HTTPClient

    public init(endpoint: ManagerURL, token: String?, timeoutMilliseconds: Int = 5_000) {
        (self.endpoint, self.token) = (endpoint, token)
        var configuration = HTTPClient.Configuration()
        configuration.timeoutMilliseconds = timeoutMilliseconds
        configuration.connectTimeoutMilliseconds = min(timeoutMilliseconds, 3_000)
        configuration.maximumResponseBytes = 64 * 1024
        http = HTTPClient(configuration: configuration)
    }

    struct Request: Encodable {
        var step: Step
        var registrationId: String
        var data: String?
    }

    struct Reply: Decodable {
        var status: String
        var message: String?
        var info: String?
        var claims: [String: ClaimValue]?
    }

    /// A claim's value: a string or a list of strings.
    enum ClaimValue: Decodable {
        case one(String)
        case many([String])
        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let text = try? container.decode(String.self) {
                self = .one(text)
            } else {
                self = .many(try container.decode([String].self))
            }
        }
        var values: [String] {
            switch self {
            case .one(let text): [text]
            case .many(let list): list
            }
        }
    }

    public func call(_ step: Step, registrationId: String, data: String?) throws -> Answer {
        let body = try JSONEncoder().encode(Request(step: step, registrationId: registrationId, data: data))
        let response: HTTPClient.Response
        do {
            response = try http.send(
                "POST", to: endpoint, path: "", body: body,
                headers: token.map { [("Authorization", "Bearer \($0)")] } ?? [])
        } catch let failure as HTTPClient.Failure {
            throw OpenIDProvider.Failure(
                "the registration service at \(endpoint) cannot be reached (\(failure)); try again later or ask your administrator"
            )
        }
        guard response.status == 200, let reply = try? JSONDecoder().decode(Reply.self, from: response.body) else {
            throw OpenIDProvider.Failure(
                "the registration service answered HTTP \(response.status) without accept, refuse or continue; ask your administrator"
            )
        }
        let text = { (value: String?) in
            value.map { DisplayText.sanitized($0, keepingLineFeeds: false) }.map { String($0.prefix(500)) }
        }
        switch reply.status {
        case "accept":
            return .accepted(claims: (reply.claims ?? [:]).mapValues(\.values), info: text(reply.info))
        case "refuse":
            return .refused(text(reply.message) ?? "the registration service refused it")
        case "continue" where step == .`init`:
            return .continued(info: text(reply.info))
        default:
            throw OpenIDProvider.Failure(
                "the registration service answered '\(reply.status.prefix(32))' to the \(step.rawValue) step; ask your administrator"
            )
        }
    }
}
