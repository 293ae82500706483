import Foundation
import HTTPTypes
import Hummingbird
import XignProtocol
import XignWeb

/// The administrator's console: server-rendered pages behind a console session, and the JSON calls its script makes
/// (the session, and each change signed with a fresh passkey assertion). Every value a page shows passes
/// `DisplayText.marked` and the template's HTML escaping.
struct ConsoleController<Context: RequestContext> {
    let manager: IdentityManager
    let web: WebApp<Context>

    static var accountsShown: Int { 200 }
    static var eventsShown: Int { 500 }

    func addRoutes(to router: Router<Context>) {
        router.get(RouterPath(WebPath.console)) { _, _ in
            try web.console(.signIn, ["title": "Sign in"])
        }
        router.get(RouterPath(WebPath.consoleAccounts)) { request, _ in
            try await page(request) { user in try await accounts(request, user) }
        }
        router.get(RouterPath(WebPath.consoleAccounts + "/:id")) { request, context in
            try await page(request) { user in try await account(context.parameters.get("id") ?? "", user) }
        }
        router.get(RouterPath(WebPath.consoleHosts)) { request, _ in
            try await page(request) { user in try await hosts(request, user) }
        }
        router.get(RouterPath(WebPath.consoleWaiting)) { request, _ in
            try await page(request) { user in try await waiting(user) }
        }
        router.get(RouterPath(WebPath.consoleHealth)) { request, _ in
            try await page(request) { user in try await health(user) }
        }
        router.get(RouterPath(WebPath.consoleAudit)) { request, _ in
            try await page(request) { user in try await audit(request, user) }
        }
        router.get(RouterPath(WebPath.consoleAuditCSV)) { request, _ in
            try await page(request) { _ in
                let events = try await manager.auditEvents(matching: try Self.filter(request), limit: 100_000)
                return WebApp<Context>.csv(
                    [["at", "event", "email", "host", "service", "detail", "actor"]]
                        + events.map {
                            [
                                Self.time($0.at), $0.event.rawValue, $0.email ?? "", $0.host ?? "", $0.service ?? "",
                                $0.detail ?? "", $0.actor,
                            ].map(DisplayText.marked)
                        })
            }
        }
        router.post(RouterPath(APIPath.consoleSessions)) { request, _ in
            let (token, session) = try await manager.openConsoleSession(
                body: try await request.collectBody(), signature: request.signatureHeader)
            var response = try Response.json(.created, session)
            response.headers[.setCookie] = Request.setCookie(
                Request.consoleCookieName, token, maxAge: IdentityManager.consoleSessionMilliseconds / 1000)
            return response
        }
        router.post(RouterPath(APIPath.consoleSessionEnd)) { request, _ in
            try await manager.endConsoleSession(token: try request.consoleCookie)
            var response = Response(status: .noContent, headers: [.cacheControl: "no-store"])
            response.headers[.setCookie] = Request.setCookie(Request.consoleCookieName, "", maxAge: 0)
            return response
        }
        router.post(RouterPath(APIPath.consoleActions)) { request, _ in
            try Response.json(
                .ok,
                try await manager.performConsoleAction(
                    body: try await request.collectBody(), signature: request.signatureHeader,
                    session: try request.consoleCookie))
        }
    }

    /// A page for the session's user, or the page that says why there is none (403).
    private func page(
        _ request: Request, _ render: (IdentityManager.ConsoleUser) async throws -> Response
    ) async throws -> Response {
        let user: IdentityManager.ConsoleUser
        do { user = try await manager.consoleUser(session: try request.consoleCookie) } catch let error as ManagerError
        {
            return try web.console(
                .denied, ["title": "Not signed in", "reason": error.detail.message], status: error.status)
        }
        return try await render(user)
    }

    /// The page of a list the request's `after` asks for (cut to a key's length, so it never fails).
    private static func listPage(_ request: Request, limit: Int) throws -> ListPage {
        let after = request.uri.queryParameters["after"].map { String(decoding: $0.utf8.prefix(254), as: UTF8.self) }
        return try ListPage(after: after, limit: limit)
    }

    /// `path` with `parameters`, each percent-encoded (an address may hold `+` or `&`).
    private static func link(_ path: String, _ parameters: KeyValuePairs<String, String>) -> String {
        let unreserved = CharacterSet(
            charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        return path + "?"
            + parameters.map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: unreserved) ?? "")" }
            .joined(separator: "&")
    }

    private func common(_ title: String, _ user: IdentityManager.ConsoleUser) -> [String: Any] {
        [
            "title": title, "deviceId": user.deviceId,
            "user": ["email": DisplayText.marked(user.email), "role": user.role.rawValue],
        ]
    }

    private func accounts(_ request: Request, _ user: IdentityManager.ConsoleUser) async throws -> Response {
        let query = String((request.uri.queryParameters["q"].map(String.init) ?? "").prefix(254))
        let found = try await manager.consoleAccounts(
            matching: query, page: try Self.listPage(request, limit: Self.accountsShown))
        var values = common("Accounts", user)
        values["query"] = DisplayText.marked(query)
        values["count"] = found.entries.count
        values["next"] = found.next.map { Self.link(WebPath.consoleAccounts, ["q": query, "after": $0]) }
        values["accounts"] = found.entries.map(Self.row)
        values["isAdmin"] = user.role == .admin
        return try web.console(.accounts, values)
    }

    private func account(_ id: String, _ user: IdentityManager.ConsoleUser) async throws -> Response {
        guard id.utf8.count <= WireLimit.identifier, let detail = try await manager.consoleAccountDetail(id: id) else {
            return try web.console(
                .denied, ["title": "No such account", "reason": "No account has this address; go back to the list."],
                status: .notFound)
        }
        var values = common(DisplayText.marked(detail.account.email), user)
        var account = Self.row(detail.account)
        account["hostGroups"] = detail.hostGroups.isEmpty ? "none" : detail.hostGroups.joined(separator: " ")
        account["hostGroupsValue"] = detail.hostGroups.joined(separator: " ")
        account["loginNameValue"] = detail.account.loginName ?? ""
        account["created"] = Self.time(detail.account.createdAt)
        account["locked"] = detail.account.lockedAt != nil
        account["offlineHours"] = detail.account.offlineGraceMilliseconds.map { "\($0 / 3_600_000)" } ?? ""
        account["offlineFailures"] = detail.account.offlineMaxFailures.map { "\($0)" } ?? ""
        values["account"] = account
        values["isAdmin"] = user.role == .admin
        values["hasCovers"] = !detail.covers.isEmpty
        values["covers"] = detail.covers.map { cover -> [String: String] in
            [
                "id": cover.id, "host": DisplayText.marked(cover.host), "loginName": cover.loginName,
                "auditSession": "\(cover.auditSession)", "since": Self.time(cover.openedAt),
                "until": Self.time(cover.expiresAt),
            ]
        }
        values["devices"] = detail.activations.map { activation -> [String: Any] in
            [
                "name": DisplayText.marked(
                    activation.deviceName.map { "\($0) (\(activation.alias))" } ?? activation.alias),
                "kind": activation.keyKind.map { $0 == .passkey ? "passkey" : "\($0.rawValue) key" }
                    ?? "not personalized",
                "platform": DisplayText.marked(activation.platform ?? ""),
                "created": activation.enrolledAt.map(Self.time) ?? "",
                "lastUsed": activation.lastUsedAt.map(Self.time) ?? "never",
                "attestation": DisplayText.marked(
                    activation.ekIssuer.map { "TPM, EK by \($0)" } ?? activation.unattestedBecause ?? ""),
                "backup": activation.synced.map { $0 ? "synced passkey" : "this device only" } ?? "",
                "state": activation.state.rawValue,
                "deviceId": activation.deviceId ?? "",
                "activationId": activation.id,
                "mayRevoke": user.role.may(.revokeDevice) && activation.state == .personalized
                    && activation.deviceId != nil,
                "mayReissue": user.role.may(.reissueActivation) && activation.state != .revoked,
            ]
        }
        return try web.console(.account, values)
    }

    private func hosts(_ request: Request, _ user: IdentityManager.ConsoleUser) async throws -> Response {
        let hosts = try await manager.administration.hosts(try Self.listPage(request, limit: Self.accountsShown))
        var values = common("Hosts", user)
        values["count"] = hosts.entries.count
        values["next"] = hosts.next.map { Self.link(WebPath.consoleHosts, ["after": $0]) }
        values["isAdmin"] = user.role == .admin
        let pending = try await manager.pendingHostJoins()
        values["hasPending"] = !pending.isEmpty
        values["pending"] = pending.map { ["name": DisplayText.marked($0.name), "until": Self.time($0.expiresAt)] }
        let policies = try await manager.administration.sudoPolicies()
        values["hasPolicies"] = !policies.isEmpty
        values["policies"] = policies.sorted { $0.key < $1.key }.flatMap { group, services in
            services.sorted { $0.key < $1.key }.map { service, policy in
                [
                    "group": group == IdentityManager.everyHost ? "every host (*)" : group,
                    "service": service == SudoPolicy.everyService ? "every service (*)" : service,
                    "policy": policy.rawValue,
                ].mapValues(DisplayText.marked)
            }
        }
        values["hosts"] = hosts.entries.map { host -> [String: String] in
            [
                "name": host.name, "groups": host.groups.isEmpty ? "none" : host.groups.joined(separator: " "),
                "key": host.ekIssuer.map { "TPM, EK by \($0)" } ?? host.keyKind, "joined": Self.time(host.joinedAt),
            ].mapValues(DisplayText.marked)
        }
        return try web.console(.hosts, values)
    }

    private func waiting(_ user: IdentityManager.ConsoleUser) async throws -> Response {
        let logins = try await manager.waitingLogins(limit: Self.accountsShown)
        var values = common("Logins waiting", user)
        values["count"] = logins.count
        values["logins"] = logins.map { login -> [String: String] in
            [
                "loginName": login.loginName, "email": login.email, "host": login.hostName, "service": login.service,
                "remote": login.remoteHost ?? "", "since": Self.time(login.createdAt),
                "until": Self.time(login.expiresAt),
            ].mapValues(DisplayText.marked)
        }
        return try web.console(.waiting, values)
    }

    private func health(_ user: IdentityManager.ConsoleUser) async throws -> Response {
        var values = common("Health", user)
        let health = try await manager.consoleHealth()
        let now = IdentityManager.now()
        values["version"] = XignManagerVersion.string
        switch health.database {
        case .success(let admins):
            values["database"] =
                "answers (\(manager.configuration.postgreSQL == nil ? "SQLite" : "PostgreSQL"), \(admins) administrator(s))"
        case .failure(let error):
            values["database"] = DisplayText.marked("does not answer: \(error)")
            values["databaseClass"] = "locked"
        }
        switch health.certificateNotValidAfter {
        case .none: values["certificate"] = "none: the manager serves plain HTTP (behind a TLS proxy, or on loopback)"
        case .success(let end):
            let days = (end - now) / 86_400_000
            values["certificate"] = "valid until \(Self.time(end)) (\(days) days)"
            if days < 14 { values["certificateClass"] = "locked" }
        case .failure(let error):
            values["certificate"] = DisplayText.marked("cannot be read: \(error)")
            values["certificateClass"] = "locked"
        }
        values["mail"] =
            health.mailOldest.map { "\(health.mailQueued) waiting, the oldest since \(Self.time($0))" } ?? "empty"
        if let oldest = health.mailOldest, now - oldest > 3_600_000 { values["mailClass"] = "locked" }
        values["waiting"] = health.waiting
        values["failures"] = health.failures.map { event -> [String: String] in
            [
                "at": Self.time(event.at), "email": event.email ?? "", "host": event.host ?? "",
                "detail": event.detail ?? "",
            ].mapValues(DisplayText.marked)
        }
        return try web.console(.health, values)
    }

    private func audit(_ request: Request, _ user: IdentityManager.ConsoleUser) async throws -> Response {
        let filter = try Self.filter(request)
        let events = try await manager.auditEvents(matching: filter, limit: Self.eventsShown + 1)
        var values = common("Audit", user)
        let days = (filter.until - filter.since) / 86_400_000
        values["filter"] = [
            "email": DisplayText.marked(filter.email ?? ""), "host": DisplayText.marked(filter.host ?? ""),
            "days": days,
        ]
        values["kinds"] = AuditEvent.Kind.allCases.filter { $0 != .unknown }.map {
            ["name": $0.rawValue, "selected": $0 == filter.kind]
        }
        values["count"] = min(events.count, Self.eventsShown)
        values["more"] = events.count > Self.eventsShown
        values["csvQuery"] = request.uri.query ?? ""
        values["events"] = events.prefix(Self.eventsShown).map { event -> [String: String] in
            [
                "at": Self.time(event.at), "event": event.event.rawValue, "email": event.email ?? "",
                "host": event.host ?? "", "service": event.service ?? "", "detail": event.detail ?? "",
                "actor": event.actor,
            ].mapValues(DisplayText.marked)
        }
        return try web.console(.audit, values)
    }

    /// The audit search from the query: address, host, kind, and the last `days` days (7 unless given).
    static func filter(_ request: Request) throws -> AuditFilter {
        let query = request.uri.queryParameters
        func text(_ name: String, _ maximum: Int) throws -> String? {
            guard let value = query[name[...]].map(String.init), !value.isEmpty else { return nil }
            guard value.utf8.count <= maximum else {
                throw ManagerError.badRequest("\(name) is longer than \(maximum)")
            }
            return value
        }
        var kind: AuditEvent.Kind?
        if let name = try text("kind", 64) {
            guard let known = AuditEvent.Kind(rawValue: name) else {
                throw ManagerError.badRequest(
                    "no audit entry is of the kind \(name.prefix(64)); choose one from the list")
            }
            kind = known
        }
        let days = try text("days", 4).map { Int64($0) } ?? 7
        guard let days, (1...3650).contains(days) else {
            throw ManagerError.badRequest("days is a number from 1 to 3650")
        }
        let now = IdentityManager.now()
        return AuditFilter(
            email: try text("email", 254), host: try text("host", 253), kind: kind, since: now - days * 86_400_000,
            until: now + 1)
    }

    static func row(_ account: ManagerStore.ConsoleAccount) -> [String: Any] {
        let now = IdentityManager.now()
        let state: String
        if let lockedAt = account.lockedAt {
            state = "locked by \(account.lockedBy ?? "an administrator"), \(time(lockedAt))"
        } else if account.permanentlyLocked {
            state = "PIN locked for good"
        } else if account.pinLockedUntil > now {
            state = "PIN locked until \(time(account.pinLockedUntil))"
        } else {
            state = "active"
        }
        return [
            "id": account.id, "email": DisplayText.marked(account.email),
            "loginName": DisplayText.marked(account.loginName ?? ""),
            "uid": account.uid.map { "\($0)" } ?? "", "state": DisplayText.marked(state),
            "stateClass": state == "active" ? "" : "locked", "failures": account.failedAttempts,
            "lastUsed": account.lastUsedAt.map(time) ?? "never", "role": account.role?.rawValue ?? "none",
        ]
    }

    static func time(_ milliseconds: Int64) -> String {
        Date(timeIntervalSince1970: Double(milliseconds) / 1000).formatted(
            .iso8601.year().month().day().dateSeparator(.dash).time(includingFractionalSeconds: false)
                .timeSeparator(.colon).dateTimeSeparator(.space))
    }
}
