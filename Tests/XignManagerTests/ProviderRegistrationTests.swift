import Foundation
import HTTPTypes
import Testing
import XignProtocol
import XignTestSupport

/// Registration through the organization's OpenID provider, with Debian's glewlwyd as the provider on loopback: the
/// code flow with PKCE and a nonce, the ID token (RS256 and ES256) checked against the provider's JWKS, the claims
/// mapped to the login name and host groups, and the activation data handed to the client once. Each refusal ends
/// with a clear message and no account; `IDTokenCheckTests` covers the tokens a real provider never issues.
@Suite(.serialized) struct ProviderRegistrationTests {
    static let publicURL = "http://localhost:8440"
    static let callback = publicURL + APIPath.providerRegistrationCallback

    static func config(_ provider: OpenIDProviderServer) throws -> String {
        try provider.managerConfig(publicURL: publicURL, base: ManagerFiles.testConfig)
    }

    /// Starts a registration through the default provider; the answer.
    static func start<Manager>(
        _ api: API<Manager>, pin: String = "24680", nonce: String = "r1"
    ) async throws -> APIAnswer {
        try await api.post(
            APIPath.providerRegistrations,
            ProviderRegistrationRequest(
                identityProvider: nil,
                sealedPin: try api.sealed(pin, for: .providerRegistration(provider: "corp", nonce: nonce)),
                alias: "Laptop", nonce: nonce))
    }

    /// The browser's return to the manager at `location` (the callback with the provider's query): status, page, and
    /// the registration cookie it set.
    static func comeBack(
        _ inProcess: InProcessManager, _ location: String, cookie: String? = nil
    ) async throws -> (status: Int, page: String, cookie: String?) {
        let path = String(location.dropFirst(publicURL.count))
        let response = try await inProcess.execute(
            .get, path, headers: cookie.map { [.cookie: "__Host-xign-registration=\($0)"] } ?? [:])
        let set = response.headers[.setCookie].flatMap { $0.split(separator: ";").first }
            .flatMap { cookie in cookie.firstIndex(of: "=").map { String(cookie[cookie.index(after: $0)...]) } }
        return (Int(response.status.code), String(buffer: response.body), set?.isEmpty == false ? set : nil)
    }

    /// The page's request with the code the start showed (or `cancel`), from the browser with `cookie`.
    static func confirm(
        _ inProcess: InProcessManager, cookie: String?, code: String?, cancel: Bool? = nil
    ) async throws -> (status: Int, json: [String: Any]) {
        let body = try JSONEncoder.canonical.encode(ProviderRegistrationConfirmationRequest(code: code, cancel: cancel))
        var headers: HTTPFields = [.contentType: "application/json"]
        if let cookie { headers[.cookie] = "__Host-xign-registration=\(cookie)" }
        let response = try await inProcess.execute(
            .post, APIPath.providerRegistrationConfirmation, headers: headers,
            body: String(decoding: body, as: UTF8.self))
        let data = Data(buffer: response.body)
        try APISpec.openAPI.get().validate(
            path: APIPath.providerRegistrationConfirmation, method: "POST", status: Int(response.status.code),
            contentType: response.headers[.contentType], body: data)
        return (Int(response.status.code), (try? JSONSerialization.jsonObject(with: data) as? [String: Any]) ?? [:])
    }

    static func outcome<Manager>(_ api: API<Manager>, _ started: [String: Any]) async throws -> [String: Any] {
        let request = ProviderRegistrationWaitRequest(
            registrationId: started["registrationId"] as? String ?? "",
            waitToken: started["waitToken"] as? String ?? "",
            nonce: "w1", waitMilliseconds: 0)
        return try await api.post(APIPath.providerRegistrationWait, request).signedPayload(
            key: try api.managerKey, type: SignedAnswerType.providerRegistration)
    }

    /// A registration started as a terminal starts it, signed in at the provider by `user`, and come back: the page
    /// that asks for the code, and its cookie.
    static func signedIn(
        _ inProcess: InProcessManager, _ provider: OpenIDProviderServer, _ user: String
    ) async throws -> (started: [String: Any], page: String, cookie: String?) {
        let started = try await start(inProcess.api).json
        let location = try await provider.signIn(
            user, password: "\(user)-pass-1", at: started["authorizationUrl"] as? String ?? "")
        let back = try await comeBack(inProcess, location)
        return (started, back.page, back.cookie)
    }

    @Test(arguments: ["ES256", "RS256"]) func aPersonRegistersWithTheMappedLoginNameAndGroupsAndActivates(
        algorithm: String
    ) async throws {
        let provider = try OpenIDProviderServer(callback: Self.callback, algorithm: algorithm)
        try await InProcessManager.run(config: try Self.config(provider)) { inProcess in
            let api = inProcess.api
            let listed = try await api.call("GET", APIPath.identityProviders)
            #expect(listed.json["defaultIdentityProvider"] as? String == "corp")
            #expect((listed.json["identityProviders"] as? [[String: Any]])?.first?["type"] as? String == "browser")

            let started = try await Self.start(api).json
            let url = try #require(started["authorizationUrl"] as? String)
            #expect(url.hasPrefix(provider.issuer + "/auth?") && url.contains("code_challenge_method=S256"), "\(url)")
            let code = try #require(started["confirmationCode"] as? String)
            #expect(code.count == 6 && code.allSatisfy(\.isNumber))
            #expect(try await Self.outcome(api, started)["outcome"] as? String == "pending")

            // Back from the provider: the page says who signed in and what is being registered, and asks for the code.
            let location = try await provider.signIn("nina", password: "nina-pass-1", at: url)
            let back = try await Self.comeBack(inProcess, location)
            #expect(back.status == 200 && back.page.contains("Is this registration yours?"), "\(back.page)")
            #expect(back.page.contains("nina@example.org") && back.page.contains("Laptop"), "\(back.page)")
            let cookie = try #require(back.cookie)
            #expect(
                try await Self.outcome(api, started)["outcome"] as? String == "pending", "no account before the code")
            #expect(try inProcess.files.query("SELECT COUNT(*) FROM accounts") == ["0"])
            let wrong = try await Self.confirm(inProcess, cookie: cookie, code: code == "000000" ? "111111" : "000000")
            #expect(wrong.status == 422 && "\(wrong.json)".contains("2 tries left"), "\(wrong.json)")
            let confirmed = try await Self.confirm(inProcess, cookie: cookie, code: code)
            #expect(confirmed.json["outcome"] as? String == "registered", "\(confirmed.json)")
            #expect("\(confirmed.json)".contains("Registered as nina@example.org (login name nina)"))

            let outcome = try await Self.outcome(api, started)
            #expect(outcome["outcome"] as? String == "registered" && outcome["loginName"] as? String == "nina")
            let payload = try PersonalizationPayload(parsing: outcome["activationLink"] as? String ?? "")
            // Given once: the next wait finds nothing.
            let again = try await api.post(
                APIPath.providerRegistrationWait,
                ProviderRegistrationWaitRequest(
                    registrationId: started["registrationId"] as? String ?? "",
                    waitToken: started["waitToken"] as? String ?? "", nonce: "w2", waitMilliseconds: 0))
            #expect(again.status == 404)

            #expect(
                try inProcess.files.query(
                    "SELECT login_name, uid IS NOT NULL FROM accounts WHERE email = 'nina@example.org'") == ["nina|1"])
            #expect(
                try inProcess.files.query(
                    "SELECT g.group_name FROM account_host_groups g JOIN accounts c ON c.id = g.account_id ORDER BY 1")
                    == ["db", "intranet", "web"])
            #expect(
                try inProcess.files.query("SELECT actor FROM audit_events WHERE event = 'accountCreated'")
                    == ["identity provider corp"])
            // The address is told, with a link that cancels; the activation data itself is never mailed.
            let mails = try inProcess.files.mails().map { try String(contentsOfFile: $0, encoding: .utf8) }
            #expect(mails.count == 1 && mails[0].contains("To: nina@example.org"), "\(mails)")
            #expect(mails[0].contains(Self.publicURL + "/link/not-me#") && !mails[0].contains("xign://"))
            // The activation data and the PIN chosen at the start personalize a device.
            let device = try await api.personalize(payload, pin: "24680")
            #expect(try await api.authenticate(device, pin: "24680").status == 200)
            // The same return again is refused: a state is answered once.
            let replayed = try await Self.comeBack(inProcess, location)
            #expect(replayed.status == 400 && replayed.page.contains("unknown, was already answered, or ran out"))
        }
    }

    /// H1: a terminal's registration becomes an account only when the person who signed in types the code the
    /// terminal shows, in the browser the provider sent back: wrong codes end it at the third, "Not mine" ends it at
    /// once, another browser (without the page's cookie) has nothing to confirm, and a terminal that stopped waiting
    /// gets nothing. Control: the right code from the right browser, beside each.
    @Test func onlyThePersonWithTheStartsCodeMakesTheAccount() async throws {
        let provider = try OpenIDProviderServer(callback: Self.callback)
        try await InProcessManager.run(config: try Self.config(provider)) { inProcess in
            let api = inProcess.api
            func accounts() throws -> [String] { try inProcess.files.query("SELECT COUNT(*) FROM accounts") }

            // Three wrong codes: refused, and the right one after them changes nothing.
            let guessed = try await Self.signedIn(inProcess, provider, "nina")
            for (guess, expected) in [("000001", "2 tries left"), ("000002", "1 try left")] {
                let wrong = try await Self.confirm(inProcess, cookie: guessed.cookie, code: guess)
                #expect(wrong.status == 422 && "\(wrong.json)".contains(expected), "\(wrong.json)")
            }
            let third = try await Self.confirm(inProcess, cookie: guessed.cookie, code: "000003")
            #expect(third.json["outcome"] as? String == "refused" && "\(third.json)".contains("wrong 3 times"))
            let late = try await Self.confirm(
                inProcess, cookie: guessed.cookie, code: guessed.started["confirmationCode"] as? String)
            #expect(late.status == 404, "\(late.json)")
            #expect(try await Self.outcome(api, guessed.started)["outcome"] as? String == "refused")

            // "Not mine": refused at once, and the terminal hears why.
            let sent = try await Self.signedIn(inProcess, provider, "nina")
            let notMine = try await Self.confirm(inProcess, cookie: sent.cookie, code: nil, cancel: true)
            #expect(notMine.json["outcome"] as? String == "refused", "\(notMine.json)")
            let told = try await Self.outcome(api, sent.started)
            #expect((told["message"] as? String ?? "").contains("said it was not theirs"), "\(told)")

            // The right code from a browser without the cookie (another one), or with no cookie at all.
            let elsewhere = try await Self.signedIn(inProcess, provider, "nina")
            let code = elsewhere.started["confirmationCode"] as? String
            #expect(try await Self.confirm(inProcess, cookie: "another-browser", code: code).status == 404)
            #expect(try await Self.confirm(inProcess, cookie: nil, code: code).status == 404)
            #expect(try accounts() == ["0"])

            // A terminal that stopped waiting (its last wait a minute ago) gets no account made for it.
            _ = try inProcess.files.query(
                "UPDATE provider_registrations SET last_waited_at = 0 WHERE id = '\(elsewhere.started["registrationId"] as? String ?? "")'"
            )
            let gone = try await Self.confirm(inProcess, cookie: elsewhere.cookie, code: code)
            #expect((gone.json["message"] as? String ?? "").contains("stopped waiting"), "\(gone.json)")
            #expect(try accounts() == ["0"])

            // Control: the right browser and the right code, while the terminal waits.
            let mine = try await Self.signedIn(inProcess, provider, "nina")
            let confirmed = try await Self.confirm(
                inProcess, cookie: mine.cookie, code: mine.started["confirmationCode"] as? String)
            #expect(confirmed.json["outcome"] as? String == "registered", "\(confirmed.json)")
            #expect(try accounts() == ["1"])
        }
    }

    /// H1: the notice mail's "not me" link cancels the registration: before the activation is used its data stops
    /// working, and after, its device is removed. Each link works once.
    @Test func theNoticeMailsLinkCancelsTheRegistrationBeforeAndAfterItsUse() async throws {
        let provider = try OpenIDProviderServer(callback: Self.callback)
        try await InProcessManager.run(config: try Self.config(provider)) { inProcess in
            let api = inProcess.api
            func register(_ user: String) async throws -> (PersonalizationPayload, token: String) {
                let signedIn = try await Self.signedIn(inProcess, provider, user)
                _ = try await Self.confirm(
                    inProcess, cookie: signedIn.cookie, code: signedIn.started["confirmationCode"] as? String)
                let outcome = try await Self.outcome(api, signedIn.started)
                let mail = try String(contentsOfFile: try #require(try inProcess.files.mails().last), encoding: .utf8)
                let token = try #require(
                    mail.components(separatedBy: "/link/not-me#").last?.prefix { !$0.isWhitespace })
                return (try PersonalizationPayload(parsing: outcome["activationLink"] as? String ?? ""), String(token))
            }
            func cancel(_ token: String) async throws -> APIAnswer {
                try await api.post(APIPath.registrationCancellations, RegistrationCancellationRequest(token: token))
            }
            let (unused, first) = try await register("nina")
            let cancelled = try await cancel(first)
            #expect(cancelled.status == 200 && "\(cancelled.json)".contains("no longer works"), "\(cancelled.json)")
            await #expect(throws: (any Error).self, "the activation data no longer works") {
                _ = try await api.personalize(unused, pin: "24680")
            }
            #expect(try await cancel(first).status == 404, "once")

            let (used, second) = try await register("olga")
            let device = try await api.personalize(used, pin: "24680")
            #expect(try await api.authenticate(device, pin: "24680").status == 200, "control: it works until cancelled")
            let removed = try await cancel(second)
            #expect("\(removed.json)".contains("can no longer log in"), "\(removed.json)")
            await #expect(throws: (any Error).self, "the device was removed") {
                _ = try await api.authenticate(device, pin: "24680")
            }
            #expect(
                try inProcess.files.query("SELECT COUNT(*) FROM audit_events WHERE detail LIKE '%(not me)%'") == ["2"])
        }
    }

    /// Each way a registration through the provider can go wrong ends with a message that says why, and no account.
    @Test func refusalsLeaveNoAccount() async throws {
        let provider = try OpenIDProviderServer(callback: Self.callback)
        try await InProcessManager.run(config: try Self.config(provider)) { inProcess in
            let api = inProcess.api
            func refused(_ user: String, expecting: String) async throws {
                let started = try await Self.start(api).json
                let location = try await provider.signIn(
                    user, password: "\(user)-pass-1", at: started["authorizationUrl"] as? String ?? "")
                let back = try await Self.comeBack(inProcess, location)
                #expect(back.status == 400 && back.page.contains(expecting), "\(user): \(back.page)")
                let outcome = try await Self.outcome(api, started)
                #expect(outcome["outcome"] as? String == "refused", "\(outcome)")
                #expect((outcome["message"] as? String ?? "").contains(expecting), "\(outcome)")
                #expect(outcome["activationLink"] == nil)
            }
            // A claimed login name of a system account, no address at all, and addresses the provider did not verify
            // (H6: false, and no claim at all).
            try await refused("omar", expecting: "claim login is no login name")
            try await refused("pat", expecting: "no valid email address")
            try await refused("vera", expecting: "has not verified vera@example.org")
            try await refused("ursula", expecting: "does not say that it verified ursula@example.org")

            // The provider refuses the person: its error code comes back instead of a code. The text beside it is
            // anyone's (a crafted link on this origin), so it is not shown.
            let started = try await Self.start(api).json
            let state = try #require(
                URLComponents(string: started["authorizationUrl"] as? String ?? "")?.queryItems?.first {
                    $0.name == "state"
                }?.value)
            let denied = try await Self.comeBack(
                inProcess,
                Self.callback + "?state=\(state)&error=access_denied&error_description=Call%20%2B1%20555%200100%20now")
            #expect(
                denied.status == 400 && denied.page.contains("refused the sign-in (access_denied)"), "\(denied.page)")
            #expect(!denied.page.contains("555"), "\(denied.page)")
            let other = try await Self.start(api).json
            let otherState =
                URLComponents(string: other["authorizationUrl"] as? String ?? "")?.queryItems?.first {
                    $0.name == "state"
                }?.value ?? ""
            let unnamed = try await Self.comeBack(inProcess, Self.callback + "?state=\(otherState)&error=%3Cb%3Eyou")
            #expect(unnamed.page.contains("an error it did not name") && !unnamed.page.contains("&lt;b&gt;you"))

            // A sign-in made for another nonce (its authorization request swapped in, PKCE intact) is refused by the
            // ID token's nonce.
            let victim = try await Self.start(api).json
            var swapped = try #require(URLComponents(string: victim["authorizationUrl"] as? String ?? ""))
            swapped.queryItems = swapped.queryItems?.map {
                $0.name == "nonce" ? URLQueryItem(name: "nonce", value: "attacker") : $0
            }
            let nonce = try await Self.comeBack(
                inProcess, try await provider.signIn("nina", password: "nina-pass-1", at: swapped.string ?? ""))
            #expect(nonce.status == 400 && nonce.page.contains("nonce differs"), "\(nonce.page)")

            // A PIN against the policy and an unknown provider are refused at the start.
            #expect(try await Self.start(api, pin: "1111").status == 422)
            let unknown = try await api.post(
                APIPath.providerRegistrations,
                ProviderRegistrationRequest(
                    identityProvider: "other",
                    sealedPin: try api.sealed("24680", for: .providerRegistration(provider: "other", nonce: "u")),
                    alias: nil, nonce: "u"))
            #expect(unknown.status == 404 && unknown.errorCode == "notFound")

            // The provider down: a start says so, and a sign-in that comes back meanwhile ends refused.
            let pending = try await Self.start(api).json
            let location = try await provider.signIn(
                "nina", password: "nina-pass-1", at: pending["authorizationUrl"] as? String ?? "")
            provider.stop()
            let down = try await Self.comeBack(inProcess, location)
            #expect(down.status == 400 && down.page.contains("cannot be reached"), "\(down.page)")
            let startDown = try await Self.start(api)
            #expect(startDown.status == 502 && startDown.errorCode == "providerUnavailable", "\(startDown.json)")
            #expect(try inProcess.files.query("SELECT COUNT(*) FROM accounts") == ["0"])
        }
    }

    /// H6: `email_verified = trusted` takes the provider's word for an address it does not say it verified, and
    /// `email_domains` keeps addresses of other domains out. Control: an address in the domain is taken.
    @Test func aProviderIsTrustedForAddressesOnlyAsConfiguredAndOnlyInItsDomains() async throws {
        let provider = try OpenIDProviderServer(callback: Self.callback)
        let config = try Self.config(provider) + "\nemail_verified = trusted\nemail_domains = example.org\n"
        try await InProcessManager.run(config: config) { inProcess in
            let unverified = try await Self.signedIn(inProcess, provider, "ursula")
            #expect(unverified.page.contains("Is this registration yours?"), "trusted: \(unverified.page)")
            let elsewhere = try await Self.signedIn(inProcess, provider, "olga")
            #expect(
                elsewhere.page.contains("olga@elsewhere.example is not in a domain Corp SSO registers (example.org)"),
                "\(elsewhere.page)")
            #expect(elsewhere.cookie == nil)
        }
    }

    @Test func aTokenFromAProviderWhoseClockIsTwoHoursBehindHasExpired() async throws {
        let provider = try OpenIDProviderServer(callback: Self.callback, clockOffset: "-2h")
        try await InProcessManager.run(config: try Self.config(provider)) { inProcess in
            let started = try await Self.start(inProcess.api).json
            let back = try await Self.comeBack(
                inProcess,
                try await provider.signIn(
                    "nina", password: "nina-pass-1", at: started["authorizationUrl"] as? String ?? ""))
            #expect(back.status == 400 && back.page.contains("has expired"), "\(back.page)")
            #expect(try inProcess.files.query("SELECT COUNT(*) FROM accounts") == ["0"])
        }
    }
}

/// Registration through the provider as people meet it, in Chromium: the phone's own registration, the manager's page
/// after the provider's sign-in, and the web app's browser binding (H1).
@Suite struct ProviderRegistrationBrowserTests {
    /// A manager process at `http://localhost:PORT`, which browsers take for a secure origin, registering through
    /// glewlwyd; its URL.
    static func managerAndProvider() throws -> (url: String, provider: OpenIDProviderServer, manager: ManagerProcess) {
        let port = try ManagerProcess.freePort()
        let url = "http://localhost:\(port)"
        let provider = try OpenIDProviderServer(callback: url + APIPath.providerRegistrationCallback)
        let manager = try ManagerProcess(
            config: try provider.managerConfig(publicURL: url, base: ManagerFiles.testConfig), port: port)
        return (url, provider, manager)
    }

    /// A phone with no Linux machine: the manager's registration page in Chromium, the provider's sign-in, and back
    /// to the activation page, where the passkey is made with the PIN chosen at the start.
    @Test func aPhoneRegistersOnTheWebPageAndGetsAPasskey() async throws {
        let (url, provider, manager) = try Self.managerAndProvider()
        let phone = Browser(
            in: TemporaryDirectory(), keptIn: OpenAPIValidator.repositoryFile(".build-screenshots/registration"))
        let atProvider = try await onOwnThread { try phone.registerThroughProvider(url + "/register", pin: "24680") }
        #expect(atProvider.list("providers") == ["Corp SSO"], "\(atProvider)")
        // The provider's login page carries the authorization request on; the person signs in there.
        let request = try #require(
            URLComponents(string: atProvider["url"])?.queryItems?.first { $0.name == "callback_url" }?.value)
        #expect(request.hasPrefix(provider.issuer + "/auth?"), "\(atProvider)")
        let location = try await provider.signIn("nina", password: "nina-pass-1", at: request)
        let activated = try await onOwnThread { try phone.personalize(location, pin: "24680") }
        #expect(activated.error.isEmpty && activated["account"].contains("nina@example.org"), "\(activated)")
        #expect(
            try manager.query(
                "SELECT d.key_kind, c.login_name FROM devices d JOIN activations a ON a.id = d.activation_id JOIN accounts c ON c.id = a.account_id"
            )
                == ["passkey|nina"])
    }

    /// Mallory starts a registration at her terminal and sends the sign-in link to Nina, who is signed in at the
    /// provider. Nina's browser comes back to the manager's page, which shows the device's name and where and when the
    /// registration started, and asks for the code at Mallory's terminal: guesses end it at the third, and "Not mine"
    /// ends it at once, with no account either way. Control: the one who started it types the code in the browser that
    /// signed in, and the account is made. In the web app, a sign-in opened in another browser than the one that
    /// started is refused; the same browser, in `aPhoneRegistersOnTheWebPageAndGetsAPasskey`, is the control.
    @Test func aSignInLinkSentToSomeoneElseEndsAtTheCode() async throws {
        let (url, provider, manager) = try Self.managerAndProvider()
        let api = API(manager: manager)
        let directory = TemporaryDirectory()
        let kept = OpenAPIValidator.repositoryFile(".build-screenshots/registration")
        /// A browser of its own for each case, so that each keeps its screenshots.
        func browser(_ name: String) -> Browser { Browser(in: directory, name: name, keptIn: kept + "/" + name) }
        /// The person's browser back from the provider at `location`, answering the page: on a thread of its own, as
        /// it blocks for seconds.
        func comeBack(in name: String, to location: String, answers: [String]) async throws -> Browser.Page {
            let browser = browser(name)
            return try await onOwnThread { try browser.confirmRegistration(location, answers: answers) }
        }
        func accounts() throws -> [String] { try manager.query("SELECT COUNT(*) FROM accounts") }
        func sentToNina() async throws -> (started: [String: Any], location: String) {
            let started = try await ProviderRegistrationTests.start(api).json
            return (
                started,
                try await provider.signIn(
                    "nina", password: "nina-pass-1", at: started["authorizationUrl"] as? String ?? "")
            )
        }

        let guessed = try await sentToNina()
        let guesses = try await comeBack(
            in: "nina-guesses", to: guessed.location, answers: ["123456", "654321", "111111"])
        #expect(guesses["page"].contains("nina@example.org") && guesses["page"].contains("Laptop"), "\(guesses)")
        #expect(guesses["page"].contains("from 127.0.0.1") && !guesses["started-at"].isEmpty, "\(guesses)")
        let attempts = browser("nina-guesses").records(guesses, "attempts").map { $0["error"] as? String ?? "" }
        #expect(attempts.count == 3 && attempts[0].contains("2 tries left") && attempts[1].contains("1 try left"))
        #expect(attempts.last?.contains("No account was made: the code was wrong 3 times") == true, "\(attempts)")
        #expect(try await ProviderRegistrationTests.outcome(api, guessed.started)["outcome"] as? String == "refused")

        let declined = try await sentToNina()
        let notMine = try await comeBack(in: "nina-declines", to: declined.location, answers: ["not mine"])
        #expect(notMine.error.contains("said it was not theirs"), "\(notMine)")
        #expect(try accounts() == ["0"])

        // Control: whoever started it signs in and types the code the terminal shows.
        let mine = try await sentToNina()
        let confirmed = try await comeBack(
            in: "nina-confirms", to: mine.location, answers: [mine.started["confirmationCode"] as? String ?? ""])
        #expect(confirmed.status.contains("Registered as nina@example.org"), "\(confirmed)")
        #expect(try await ProviderRegistrationTests.outcome(api, mine.started)["outcome"] as? String == "registered")
        #expect(try accounts() == ["1"])

        // The web app: Mallory's phone starts at /register and sends the provider's link on; Olga signs in, and her
        // browser, which has not got the cookie of that start, comes back to a refusal.
        let mallory = browser("mallory")
        let atProvider = try await onOwnThread { try mallory.registerThroughProvider(url + "/register", pin: "24680") }
        let request = try #require(
            URLComponents(string: atProvider["url"])?.queryItems?.first { $0.name == "callback_url" }?.value)
        let elsewhere = try await comeBack(
            in: "olga", to: try await provider.signIn("olga", password: "olga-pass-1", at: request), answers: [])
        #expect(elsewhere["notice"].contains("started in another browser"), "\(elsewhere)")
        #expect(try accounts() == ["1"])
    }
}

/// OneWelcome's custom API identity provider: the organization's endpoint accepts in one step or two, refuses, or
/// answers what it may not; each ends as the endpoint said, with the claims mapped as for a browser provider.
@Suite struct CustomProviderRegistrationTests {
    static func config(_ service: RegistrationService, hrToken: Bool = true) throws -> String {
        """
        \(ManagerFiles.testConfig)
        [server]
        public_url = http://localhost:8440
        [registration]
        open = false
        [identity_providers]
        names = hr, badge
        \(try service.providerSection(
            "hr", steps: 2, token: hrToken, extra: "name = HR check\nlogin_name_claim = login\ngroups_claim = groups\nhost_groups = staff:intranet"))
        \(try service.providerSection("badge", steps: 1, extra: "groups_claim = groups\nhost_groups = web-admins:web"))
        """
    }

    static func start(_ api: API<ManagerFiles>, _ provider: String) async throws -> [String: Any] {
        try await api.post(
            APIPath.providerRegistrations,
            ProviderRegistrationRequest(
                identityProvider: provider,
                sealedPin: try api.sealed("24680", for: .providerRegistration(provider: provider, nonce: "c1")),
                alias: nil, nonce: "c1")
        ).json
    }

    static func step(
        _ api: API<ManagerFiles>, _ started: [String: Any], _ step: CustomRegistrationStep, _ data: String?
    ) async throws -> APIAnswer {
        try await api.post(
            APIPath.customRegistrationSteps,
            CustomRegistrationStepRequest(
                registrationId: started["registrationId"] as? String ?? "",
                waitToken: started["waitToken"] as? String ?? "", step: step, data: data))
    }

    @Test func oneStepTwoStepsAndRefusals() async throws {
        let service = try RegistrationService()
        try await InProcessManager.run(config: try Self.config(service)) { inProcess in
            let api = inProcess.api
            let listed = try await api.call("GET", APIPath.identityProviders).json
            #expect(
                (listed["identityProviders"] as? [[String: Any]])?.map { $0["type"] as? String } == [
                    "custom", "custom",
                ])

            // Registration by mail is closed here; the providers the administrator configured still register.
            #expect(try await api.postRegistration("someone@example.org").status == 403)
            // Two steps: init continues with the service's text, finish accepts.
            let hr = try await Self.start(api, "hr")
            #expect(hr["customStep"] as? String == "init" && hr["authorizationUrl"] == nil, "\(hr)")
            // The finish step before the init one is refused, and changes nothing.
            #expect(try await Self.step(api, hr, .finish, "314159").status == 409)
            let first = try await Self.step(api, hr, .`init`, "employee 42").json
            #expect(first["outcome"] as? String == "pending" && first["nextStep"] as? String == "finish", "\(first)")
            #expect(first["info"] as? String == "Type the code HR sent to employee 42")
            let second = try await Self.step(api, hr, .finish, "314159").json
            #expect(second["outcome"] as? String == "registered", "\(second)")
            let outcome = try await ProviderRegistrationTests.outcome(api, hr)
            #expect(outcome["loginName"] as? String == "emp42" && outcome["activationLink"] != nil, "\(outcome)")

            // One step, the provider may not give a login name here: none is given.
            let badge = try await Self.start(api, "badge")
            #expect(badge["customStep"] as? String == "finish")
            #expect(try await Self.step(api, badge, .finish, "badge 7").json["outcome"] as? String == "registered")
            #expect(
                try inProcess.files.query(
                    "SELECT c.email, COALESCE(c.login_name, '-'), g.group_name FROM accounts c JOIN account_host_groups g ON g.account_id = c.id ORDER BY 1"
                ) == ["badge7@example.org|-|web", "emp42@example.org|emp42|intranet"])

            // Refusals: the service's own, an answer it may not give, and a wrong token.
            for (provider, step, data, expected) in [
                (
                    "hr", CustomRegistrationStep.`init`, "employee 43",
                    "HR check refused the registration: no such employee"
                ),
                ("badge", .finish, "guess", "refused the registration: wrong code"),
                ("badge", .finish, "garbled", "answered 'maybe' to the finish step"),
            ] {
                let started = try await Self.start(api, provider)
                let answer = try await Self.step(api, started, step, data).json
                #expect(answer["outcome"] as? String == "refused", "\(answer)")
                #expect((answer["message"] as? String ?? "").contains(expected), "\(answer)")
                let waited = try await ProviderRegistrationTests.outcome(api, started)
                #expect(waited["outcome"] as? String == "refused" && waited["activationLink"] == nil)
            }
            #expect(try inProcess.files.query("SELECT COUNT(*) FROM accounts") == ["2"])
        }
    }

    @Test func theServiceRefusesAManagerWithoutItsToken() async throws {
        let service = try RegistrationService()
        try await InProcessManager.run(config: try Self.config(service, hrToken: false)) { inProcess in
            let started = try await Self.start(inProcess.api, "hr")
            let answer = try await Self.step(inProcess.api, started, .`init`, "employee 42").json
            #expect((answer["message"] as? String ?? "").contains("answered HTTP 401"), "\(answer)")
            #expect(try inProcess.files.query("SELECT COUNT(*) FROM accounts") == ["0"])
        }
    }
}
