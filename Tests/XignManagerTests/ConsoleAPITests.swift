import Foundation
import HTTPTypes
import Testing
import XignCrypto
import XignManager
import XignProtocol
import XignTestSupport

/// The console's authorization, through the real router: who may open a session, which role may make which change,
/// what a page from another origin or a request without a session gets, and that an administrator's lock stops the
/// next login. Each refusal stands beside a control that passes.
@Suite struct ConsoleAPITests {
    typealias Device = (id: String, key: P256PrivateKey)

    /// Opens a console session for `device` (passkey-less: a device key signs, as a machine's would); the answer and the
    /// cookie's token.
    static func openSession(_ inProcess: InProcessManager, _ device: Device) async throws -> (Int, String?, Data) {
        let access = ApiAccessAPITests()
        let grant = try await access.grant(inProcess.api, device, .console)
        let body = try JSONEncoder.canonical.encode(ApiAccessRequest(grant: grant, nonce: "c"))
        let response = try await inProcess.execute(
            .post, APIPath.consoleSessions,
            headers: [
                .contentType: "application/json",
                HTTPField.Name(SignedRequest.signatureHeader)!: try access.sign(
                    body, APIPath.consoleSessions, grant, device.key),
            ], body: String(decoding: body, as: UTF8.self))
        let token = response.headers[.setCookie].flatMap { cookie in
            cookie.split(separator: ";").first?.split(separator: "=", maxSplits: 1).last.map(String.init)
        }
        let answer = Data(buffer: response.body)
        try APISpec.openAPI.get().validate(
            path: APIPath.consoleSessions, method: "POST", status: Int(response.status.code),
            contentType: response.headers[.contentType], body: answer)
        return (Int(response.status.code), token, answer)
    }

    /// One console change by `device` in the session `token`, signed over a fresh challenge by `signer`.
    static func act(
        _ inProcess: InProcessManager, _ token: String?, _ device: Device, _ action: ConsoleAction,
        on accountId: String?,
        signer: P256PrivateKey? = nil, origin: String? = nil, change: (inout ConsoleActionRequest) -> Void = { _ in }
    ) async throws -> APIAnswerLike {
        let challenge =
            try await inProcess.api.post(APIPath.challenges, ChallengeRequest(deviceId: device.id)).json["challenge"]
            as? String ?? ""
        var request = ConsoleActionRequest(
            deviceId: device.id, challenge: challenge, action: action, accountId: accountId)
        change(&request)
        let body = try JSONEncoder.canonical.encode(request)
        var headers: HTTPFields = [
            .contentType: "application/json",
            HTTPField.Name(SignedRequest.signatureHeader)!: try ApiAccessAPITests().sign(
                body, APIPath.consoleActions, challenge, signer ?? device.key),
        ]
        if let token { headers[.cookie] = "__Host-xign-console=\(token)" }
        if let origin { headers[.origin] = origin }
        let response = try await inProcess.execute(
            .post, APIPath.consoleActions, headers: headers, body: String(decoding: body, as: UTF8.self))
        let answer = APIAnswerLike(status: Int(response.status.code), body: Data(buffer: response.body))
        try APISpec.openAPI.get().validate(
            path: APIPath.consoleActions, method: "POST", status: answer.status,
            contentType: response.headers[.contentType], body: answer.body)
        return answer
    }

    struct APIAnswerLike {
        let status: Int
        let body: Data
        var code: String? {
            ((try? JSONSerialization.jsonObject(with: body) as? [String: Any])?["error"] as? [String: Any])?["code"]
                as? String
        }
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    static func accountId(_ inProcess: InProcessManager, _ email: String) throws -> String {
        try #require(try inProcess.files.query("SELECT id FROM accounts WHERE email = '\(email)'").first)
    }

    static func page(
        _ inProcess: InProcessManager, _ path: String, token: String?
    ) async throws -> (Int, HTTPFields, String) {
        let response = try await inProcess.execute(
            .get, path, headers: token.map { [.cookie: "__Host-xign-console=\($0)"] } ?? [:])
        return (Int(response.status.code), response.headers, String(buffer: response.body))
    }

    @Test(arguments: TestDatabase.allCases) func theRolesDecideWhoMayDoWhat(database: TestDatabase) async throws {
        try await InProcessManager.run(database: database) { inProcess in
            let api = inProcess.api
            let admin = try await api.enrolDevice("admin@example.org")
            let helpdesk = try await api.enrolDevice("help@example.org")
            let plain = try await api.enrolDevice("plain@example.org")
            let bob = try await api.enrolDevice("bob@example.org")
            try await inProcess.manager.administration.setRole(.admin, email: "admin@example.org")
            try await inProcess.manager.administration.setRole(.helpdesk, email: "help@example.org")
            let bobId = try Self.accountId(inProcess, "bob@example.org")

            // A plain account opens no session, and a request without one gets 403 (page and API).
            let (plainStatus, plainToken, _) = try await Self.openSession(inProcess, plain)
            #expect(plainStatus == 403 && plainToken == nil)
            let (noSession, _, deniedPage) = try await Self.page(inProcess, "/console/accounts", token: nil)
            #expect(noSession == 403 && deniedPage.contains("sign in at /console"))
            let anonymous = try await Self.act(inProcess, nil, admin, .lock, on: bobId)
            #expect(anonymous.status == 403 && anonymous.code == "sessionInvalid", "\(anonymous.text)")

            let (status, adminToken, _) = try await Self.openSession(inProcess, admin)
            #expect(status == 201 && adminToken != nil)
            let (_, helpToken, _) = try await Self.openSession(inProcess, helpdesk)

            // The helpdesk locks and unlocks, and may neither delete nor give roles.
            #expect(try await Self.act(inProcess, helpToken, helpdesk, .lock, on: bobId).status == 200)
            let deleting = try await Self.act(inProcess, helpToken, helpdesk, .delete, on: bobId)
            #expect(deleting.status == 403 && deleting.text.contains("helpdesk role may not delete"))
            let promoting = try await Self.act(inProcess, helpToken, helpdesk, .setRole, on: bobId) { $0.role = .admin }
            #expect(promoting.status == 403)
            let inviting = try await Self.act(inProcess, helpToken, helpdesk, .invite, on: nil) {
                $0.email = "mallory@example.org"
            }
            #expect(inviting.status == 403)
            #expect(try await Self.act(inProcess, helpToken, helpdesk, .unlock, on: bobId).status == 200)

            // A session's change is signed by its own device over a fresh challenge: another key, another device, or
            // the admin's cookie with the helpdesk's device are refused.
            let forged = try await Self.act(inProcess, adminToken, admin, .lock, on: bobId, signer: bob.key)
            #expect(forged.status == 401, "\(forged.text)")
            let borrowed = try await Self.act(inProcess, adminToken, helpdesk, .delete, on: bobId)
            #expect(borrowed.status == 403 && borrowed.text.contains("passkey that opened the session"))
            // A page of another origin is refused before anything is read.
            let elsewhere = try await Self.act(
                inProcess, adminToken, admin, .lock, on: bobId, origin: "https://evil.example")
            #expect(elsewhere.status == 403 && elsewhere.text.contains("may not call this manager"))

            // The administrator gives a role, and nobody locks or deletes themselves here.
            let given = try await Self.act(inProcess, adminToken, admin, .setRole, on: bobId) { $0.role = .helpdesk }
            #expect(given.status == 200, "\(given.text)")
            let adminId = try Self.accountId(inProcess, "admin@example.org")
            #expect(try await Self.act(inProcess, adminToken, admin, .lock, on: adminId).status == 409)

            // The role is read at every request: taking the helpdesk's ends its session's power at once.
            try await inProcess.manager.administration.setRole(nil, email: "help@example.org")
            #expect(try await Self.act(inProcess, helpToken, helpdesk, .unlock, on: bobId).status == 403)
            let (afterRole, _, _) = try await Self.page(inProcess, "/console/accounts", token: helpToken)
            #expect(afterRole == 403)

            // The fleet: only an administrator invites and adds or removes hosts; the PIN and the token are answered
            // once, to the page.
            let helpInvite = try await Self.act(inProcess, adminToken, admin, .invite, on: nil) {
                $0.email = "carol@example.org"
                $0.loginName = "carol"
            }
            #expect(helpInvite.status == 200 && helpInvite.text.contains("activation PIN is "), "\(helpInvite.text)")
            #expect(
                try inProcess.files.query("SELECT login_name FROM accounts WHERE email = 'carol@example.org'") == [
                    "carol"
                ])
            let host = try await Self.act(inProcess, adminToken, admin, .addHost, on: nil) {
                $0.hostName = "web1.example.org"
                $0.hostGroups = ["web"]
            }
            #expect(host.status == 200 && host.text.contains("Join token for web1.example.org"), "\(host.text)")
            let (_, _, hostsPage) = try await Self.page(inProcess, "/console/hosts", token: adminToken)
            #expect(hostsPage.contains("Join tokens not used yet") && hostsPage.contains("web1.example.org, until"))
            let removed = try await Self.act(inProcess, adminToken, admin, .removeHost, on: nil) {
                $0.hostName = "web1.example.org"
            }
            #expect(removed.status == 200, "\(removed.text)")
            let (_, _, afterRemoval) = try await Self.page(inProcess, "/console/hosts", token: adminToken)
            #expect(!afterRemoval.contains("web1.example.org"), "the token was revoked with the host")
            let offline = try await Self.act(inProcess, adminToken, admin, .setOfflinePolicy, on: bobId) {
                $0.offlineGraceSeconds = 3600
                $0.offlineMaxFailures = 3
            }
            #expect(offline.status == 200, "\(offline.text)")
            #expect(
                try inProcess.files.query(
                    "SELECT offline_grace, offline_max_failures FROM accounts WHERE email = 'bob@example.org'") == [
                        "3600000|3"
                    ])
            let tooLong = try await Self.act(inProcess, adminToken, admin, .setOfflinePolicy, on: bobId) {
                $0.offlineGraceSeconds = 100 * 86_400
            }
            #expect(tooLong.status == 400 && tooLong.text.contains("90 days"), "\(tooLong.text)")

            #expect(try await Self.act(inProcess, adminToken, admin, .delete, on: bobId).status == 200)
            #expect(try inProcess.files.query("SELECT COUNT(*) FROM accounts WHERE email = 'bob@example.org'") == ["0"])
            let audit = try inProcess.files.query(
                "SELECT event, actor FROM audit_events WHERE actor LIKE 'console %' ORDER BY at")
            #expect(
                audit == [
                    "accountLocked|console help@example.org", "unlock|console help@example.org",
                    "roleSet|console admin@example.org", "accountCreated|console admin@example.org",
                    "hostAdded|console admin@example.org", "hostRemoved|console admin@example.org",
                    "offlinePolicySet|console admin@example.org", "accountDeleted|console admin@example.org",
                ], "\(audit)")
        }
    }

    /// The hosts page shows each host group's sudo policies and lets an administrator (only) set them; a bad group or
    /// service is refused with what to type, and nothing is written.
    @Test(arguments: TestDatabase.allCases) func anAdministratorSetsASudoPolicyInTheConsole(
        database: TestDatabase
    ) async throws {
        try await InProcessManager.run(database: database) { inProcess in
            let admin = try await inProcess.api.enrolDevice("admin@example.org")
            let helpdesk = try await inProcess.api.enrolDevice("help@example.org")
            try await inProcess.manager.administration.setRole(.admin, email: "admin@example.org")
            try await inProcess.manager.administration.setRole(.helpdesk, email: "help@example.org")
            let (_, adminToken, _) = try await Self.openSession(inProcess, admin)
            let (_, helpToken, _) = try await Self.openSession(inProcess, helpdesk)
            let rows = { try inProcess.files.query("SELECT group_name, service, policy FROM host_group_sudo_policies") }
            let (_, _, before) = try await Self.page(inProcess, "/console/hosts", token: adminToken)
            #expect(before.contains("No group sets one"), "\(before)")

            let byHelpdesk = try await Self.act(inProcess, helpToken, helpdesk, .setSudoPolicy, on: nil) {
                $0.hostGroup = "web"
                $0.sudoPolicy = .session
            }
            #expect(byHelpdesk.status == 403 && byHelpdesk.text.contains("may not setSudoPolicy"), "\(byHelpdesk.text)")
            let noGroup = try await Self.act(inProcess, adminToken, admin, .setSudoPolicy, on: nil) {
                $0.sudoPolicy = .session
            }
            #expect(noGroup.status == 400 && noGroup.text.contains("needs the field hostGroup"), "\(noGroup.text)")
            let badService = try await Self.act(inProcess, adminToken, admin, .setSudoPolicy, on: nil) {
                $0.hostGroup = "web"
                $0.service = "sudo;rm"
                $0.sudoPolicy = .session
            }
            #expect(
                badService.status == 400 && badService.text.contains("not a PAM service name"), "\(badService.text)")
            #expect(try rows().isEmpty)

            // The control: the administrator's line is kept, shown on the page and audited with who set it.
            let set = try await Self.act(inProcess, adminToken, admin, .setSudoPolicy, on: nil) {
                $0.hostGroup = "web"
                $0.service = "sudo"
                $0.sudoPolicy = .session
            }
            #expect(set.status == 200 && set.text.contains("sudo on the hosts of web: session."), "\(set.text)")
            let everywhere = try await Self.act(inProcess, adminToken, admin, .setSudoPolicy, on: nil) {
                $0.hostGroup = "*"
                $0.sudoPolicy = .fresh
            }
            #expect(everywhere.status == 200, "\(everywhere.text)")
            #expect(try rows().sorted() == ["*|*|fresh", "web|sudo|session"])
            let (_, _, shown) = try await Self.page(inProcess, "/console/hosts", token: helpToken)
            #expect(
                shown.contains(
                    "<td data-label=\"Host group\">web</td><td data-label=\"PAM service\">sudo</td><td data-label=\"Policy\">session</td>"
                ), "\(shown)")
            #expect(
                shown.contains("every host (*)") && !shown.contains("id=\"sudo-form\""), "the helpdesk sees no form")

            // No policy removes the line.
            let removed = try await Self.act(inProcess, adminToken, admin, .setSudoPolicy, on: nil) {
                $0.hostGroup = "web"
                $0.service = "sudo"
            }
            #expect(
                removed.status == 200 && removed.text.contains("web says nothing about sudo now"), "\(removed.text)")
            #expect(try rows() == ["*|*|fresh"])
            #expect(
                try inProcess.files.query("SELECT actor FROM audit_events WHERE event = 'sudoPolicySet'")
                    == Array(
                        repeating: "console admin@example.org", count: 3))
        }
    }

    /// H4: a helpdesk acts only on accounts that hold no role, and lifts only a lock a helpdesk set, so it cannot lock
    /// an administrator out, clear an administrator's PIN lockout (with that administrator's device, an endless PIN
    /// search) or mail one new activation data; and no change, not even one from the command line, leaves the manager
    /// without an unlocked administrator. Each refusal beside the same change of an account without a role.
    @Test(arguments: TestDatabase.allCases) func aHelpdeskActsOnlyBelowItAndAnAdministratorAlwaysRemains(
        database: TestDatabase
    ) async throws {
        try await InProcessManager.run(database: database) { inProcess in
            let api = inProcess.api
            let admin = try await api.enrolDevice("admin@example.org")
            let helpdesk = try await api.enrolDevice("help@example.org")
            for email in ["second@example.org", "other-help@example.org", "bob@example.org", "carol@example.org"] {
                _ = try await api.enrolDevice(email)
            }
            let cli = inProcess.manager.administration
            try await cli.setRole(.admin, email: "admin@example.org")
            try await cli.setRole(.admin, email: "second@example.org")
            try await cli.setRole(.helpdesk, email: "help@example.org")
            try await cli.setRole(.helpdesk, email: "other-help@example.org")
            let (_, adminToken, _) = try await Self.openSession(inProcess, admin)
            let (_, helpToken, _) = try await Self.openSession(inProcess, helpdesk)
            let (second, otherHelp, bob, carol) = (
                try Self.accountId(inProcess, "second@example.org"),
                try Self.accountId(inProcess, "other-help@example.org"),
                try Self.accountId(inProcess, "bob@example.org"),
                try Self.accountId(inProcess, "carol@example.org")
            )
            func activation(_ account: String) throws -> String {
                try #require(
                    try inProcess.files.query("SELECT id FROM activations WHERE account_id = '\(account)'").first)
            }
            func lockPermanently(_ account: String) throws {
                _ = try inProcess.files.query(
                    "UPDATE activations SET failed_attempts = 10, permanently_locked = 1 WHERE account_id = '\(account)'"
                )
            }
            func helpdeskDoes(
                _ action: ConsoleAction, on account: String, _ change: (inout ConsoleActionRequest) -> Void = { _ in }
            ) async throws -> APIAnswerLike {
                try await Self.act(inProcess, helpToken, helpdesk, action, on: account, change: change)
            }

            // Accounts with a role, administrator or helpdesk, are out of the helpdesk's reach; bob is the control.
            for target in [second, otherHelp] {
                for action in [ConsoleAction.lock, .unlock] {
                    let refused = try await helpdeskDoes(action, on: target)
                    #expect(
                        refused.status == 403 && refused.text.contains("a helpdesk acts only on accounts without one"),
                        "\(action) \(refused.text)")
                }
            }
            let reissue = try await helpdeskDoes(.reissueActivation, on: second) {
                $0.activationId = try? activation(second)
            }
            #expect(reissue.status == 403, "\(reissue.text)")
            let bobActivation = try activation(bob)
            #expect(
                try await helpdeskDoes(.reissueActivation, on: bob) { $0.activationId = bobActivation }.status == 200)
            // A permanent PIN lockout: the administrator's stays, bob's is the helpdesk's to clear.
            try lockPermanently(second)
            try lockPermanently(bob)
            #expect(try await helpdeskDoes(.unlock, on: second).status == 403)
            #expect(try await helpdeskDoes(.unlock, on: bob).status == 200)
            #expect(
                try inProcess.files.query(
                    "SELECT permanently_locked FROM activations WHERE account_id IN ('\(second)', '\(bob)') ORDER BY account_id = '\(bob)'"
                )
                    == ["1", "0"])

            // A lock an administrator set stays until an administrator lifts it; a helpdesk's own the helpdesk lifts.
            #expect(try await Self.act(inProcess, adminToken, admin, .lock, on: carol).status == 200)
            let lifting = try await helpdeskDoes(.unlock, on: carol)
            #expect(lifting.status == 403 && lifting.text.contains("an administrator locked"), "\(lifting.text)")
            #expect(try await helpdeskDoes(.lock, on: bob).status == 200)
            #expect(try await helpdeskDoes(.unlock, on: bob).status == 200)
            #expect(try await Self.act(inProcess, adminToken, admin, .unlock, on: carol).status == 200)

            // One administrator left unlocked: no lock, demotion or deletion of it goes through, from the console or
            // the command line; with a second one back, the same lock does.
            #expect(try await Self.act(inProcess, adminToken, admin, .lock, on: second).status == 200)
            for (what, change) in [
                ("lock", { try await cli.lockAccount(email: "admin@example.org") }),
                ("demote", { try await cli.setRole(.helpdesk, email: "admin@example.org") }),
                ("delete", { _ = try await cli.deleteAccount(email: "admin@example.org") }),
            ] as [(String, () async throws -> Void)] {
                await #expect(throws: ManagerError.self, "\(what)") { try await change() }
                #expect(
                    try inProcess.files.query(
                        "SELECT role, COALESCE(locked_at, 0) FROM accounts WHERE email = 'admin@example.org'") == [
                            "admin|0"
                        ],
                    "\(what)")
            }
            do { try await cli.lockAccount(email: "admin@example.org") } catch let error as ManagerError {
                #expect(error.detail.message.contains("the last unlocked administrator"), "\(error.detail.message)")
            }
            try await cli.unlockAccount(email: "second@example.org")
            try await cli.lockAccount(email: "admin@example.org")
            #expect(
                try inProcess.files.query("SELECT locked_by_role FROM accounts WHERE email = 'admin@example.org'")
                    == ["admin"], "the command line locks as an administrator")
        }
    }

    @Test func aLockedAccountLogsInAgainOnlyAfterItIsUnlocked() async throws {
        try await InProcessManager.run { inProcess in
            let api = inProcess.api
            let admin = try await api.enrolDevice("admin@example.org")
            let bob = try await api.enrolDevice("bob@example.org")
            try await inProcess.manager.administration.setRole(.admin, email: "admin@example.org")
            let (_, token, _) = try await Self.openSession(inProcess, admin)
            let bobId = try Self.accountId(inProcess, "bob@example.org")
            // Control: bob logs in.
            #expect(try await api.authenticate(bob, pin: "24680").status == 200)
            #expect(try await Self.act(inProcess, token, admin, .lock, on: bobId).status == 200)
            // Locked: refused before any PIN is checked, so even a wrong PIN charges nothing.
            let refused = try await api.postStart(bob)
            #expect(refused.status == 423 && refused.errorCode == "accountLocked", "\(refused.json)")
            #expect(
                try inProcess.files.query(
                    "SELECT failed_attempts FROM activations a JOIN accounts c ON c.id = a.account_id WHERE c.email = 'bob@example.org'"
                ) == ["0"])
            let (_, _, list) = try await Self.page(inProcess, "/console/accounts?q=bob", token: token)
            #expect(list.contains("locked by console admin@example.org"))
            #expect(try await Self.act(inProcess, token, admin, .unlock, on: bobId).status == 200)
            #expect(try await api.authenticate(bob, pin: "24680").status == 200)
        }
    }

    @Test func everyConsolePageHasTheWebAppsHeadersAndShowsHostileTextInert() async throws {
        try await InProcessManager.run { inProcess in
            let api = inProcess.api
            let admin = try await api.enrolDevice("admin@example.org")
            _ = try await api.enrolDevice("eve@example.org")
            try await inProcess.manager.administration.setRole(.admin, email: "admin@example.org")
            // What the manager's own checks keep out of the store, as if an older version or a restored backup held it.
            _ = try inProcess.files.query(
                "UPDATE activations SET alias = '<script>window.__xss=1</script>' || char(0) || char(8238) || 'gpj.exe' WHERE account_id = (SELECT id FROM accounts WHERE email = 'eve@example.org')"
            )
            _ = try inProcess.files.query(
                "UPDATE accounts SET login_name = '\"><img src=x onerror=alert(1)>' WHERE email = 'eve@example.org'")
            let (_, token, _) = try await Self.openSession(inProcess, admin)
            let eveId = try Self.accountId(inProcess, "eve@example.org")
            for path in [
                "/console", "/console/accounts", "/console/accounts/\(eveId)", "/console/audit", "/console/hosts",
                "/console/health", "/console/waiting",
            ] {
                let (status, headers, html) = try await Self.page(inProcess, path, token: token)
                #expect(status == 200, "\(path)")
                #expect(headers[.contentSecurityPolicy]?.contains("script-src 'self'") == true, "\(path)")
                #expect(headers[.contentSecurityPolicy]?.contains("frame-ancestors 'none'") == true, "\(path)")
                #expect(headers[HTTPField.Name("X-Frame-Options")!] == "DENY", "\(path)")
                #expect(headers[HTTPField.Name("X-Content-Type-Options")!] == "nosniff", "\(path)")
                #expect(headers[.cacheControl] == "no-store", "\(path)")
                #expect(!html.contains("<script>window") && !html.contains("<img src=x"), "\(path)")
                #expect(!html.unicodeScalars.contains { $0.value == 0 || $0.value == 0x202E }, "\(path)")
            }
            let (_, _, detail) = try await Self.page(inProcess, "/console/accounts/\(eveId)", token: token)
            #expect(detail.contains("&lt;script&gt;window.__xss=1&lt;/script&gt;\u{FFFD}\u{FFFD}gpj.exe"))
            #expect(detail.contains("&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"))
            // The CSV escapes what a spreadsheet would run.
            _ = try inProcess.files.query(
                "INSERT INTO audit_events (id, at, event, email, detail, actor) VALUES ('x', \(Int64(Date().timeIntervalSince1970 * 1000)), 'login', 'eve@example.org', '=HYPERLINK(\"http://evil\")', 'manager')"
            )
            let (csvStatus, csvHeaders, csv) = try await Self.page(
                inProcess, "/console/audit.csv?email=eve@example.org", token: token)
            #expect(csvStatus == 200 && csvHeaders[.contentType]?.hasPrefix("text/csv") == true)
            #expect(csv.contains("\"'=HYPERLINK(\"\"http://evil\"\")\""), "\(csv)")
            // Control: a search that matches nothing lists nothing, and an unknown kind is a clear error.
            let (_, _, none) = try await Self.page(inProcess, "/console/accounts?q=nobody", token: token)
            #expect(none.contains("0 account(s)"))
            let (badKind, _, _) = try await Self.page(inProcess, "/console/audit?kind=nothing", token: token)
            #expect(badKind == 400)
        }
    }
}
