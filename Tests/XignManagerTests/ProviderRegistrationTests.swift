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
    static func start(_ api: API<ManagerFiles>, pin: String = "24680", nonce: String = "r1") async throws -> APIAnswer {
        try await api.post(
            APIPath.providerRegistrations,
            ProviderRegistrationRequest(
                identityProvider: nil,
                sealedPin: try api.sealed(pin, for: .providerRegistration(provider: "corp", nonce: nonce)),
                alias: "Laptop", nonce: nonce))
    }

    /// The browser's return to the manager at `location` (the callback with the provider's query); status and page.
    static func comeBack(_ inProcess: InProcessManager, _ location: String) async throws -> (Int, String) {
        let path = String(location.dropFirst(publicURL.count))
        let response = try await inProcess.execute(.get, path)
        return (Int(response.status.code), String(buffer: response.body))
    }

    static func outcome(_ api: API<ManagerFiles>, _ started: [String: Any]) async throws -> [String: Any] {
        let request = ProviderRegistrationWaitRequest(
            registrationId: started["registrationId"] as? String ?? "",
            waitToken: started["waitToken"] as? String ?? "",
            nonce: "w1", waitMilliseconds: 0)
        return try await api.post(APIPath.providerRegistrationWait, request).signedPayload(
            key: try api.managerKey, type: SignedAnswerType.providerRegistration)
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
            #expect(try await Self.outcome(api, started)["outcome"] as? String == "pending")

            let location = try provider.signIn("nina", password: "nina-pass-1", at: url)
            let (status, page) = try await Self.comeBack(inProcess, location)
            #expect(status == 200 && page.contains("Registered as nina@example.org (login name nina)"), "\(page)")
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
            #expect(try inProcess.files.query("SELECT COUNT(*) FROM mail_queue") == ["0"], "no mail step")
            // The activation data and the PIN chosen at the start personalize a device.
            let device = try await api.personalize(payload, pin: "24680")
            #expect(try await api.authenticate(device, pin: "24680").status == 200)
            // The same return again is refused: a state is answered once.
            let (replayed, replayPage) = try await Self.comeBack(inProcess, location)
            #expect(replayed == 400 && replayPage.contains("unknown, was already answered, or ran out"))
        }
    }

    /// Each way a registration through the provider can go wrong ends with a message that says why, and no account.
    @Test func refusalsLeaveNoAccount() async throws {
        let provider = try OpenIDProviderServer(callback: Self.callback)
        try await InProcessManager.run(config: try Self.config(provider)) { inProcess in
            let api = inProcess.api
            func refused(_ user: String, _ password: String, expecting: String) async throws {
                let started = try await Self.start(api).json
                let location = try provider.signIn(
                    user, password: password, at: started["authorizationUrl"] as? String ?? "")
                let (status, page) = try await Self.comeBack(inProcess, location)
                #expect(status == 400 && page.contains(expecting), "\(user): \(page)")
                let outcome = try await Self.outcome(api, started)
                #expect(outcome["outcome"] as? String == "refused", "\(outcome)")
                #expect((outcome["message"] as? String ?? "").contains(expecting), "\(outcome)")
                #expect(outcome["activationLink"] == nil)
            }
            // A claimed login name of a system account, and no address at all.
            try await refused("omar", "omar-pass-1", expecting: "claim login is no login name")
            try await refused("pat", "pat-pass-1", expecting: "no valid email address")

            // The provider refuses the person: its error comes back instead of a code.
            let started = try await Self.start(api).json
            let state = try #require(
                URLComponents(string: started["authorizationUrl"] as? String ?? "")?.queryItems?.first {
                    $0.name == "state"
                }?.value)
            let (status, page) = try await Self.comeBack(
                inProcess, Self.callback + "?state=\(state)&error=access_denied&error_description=%3Cb%3Eno%3C%2Fb%3E")
            #expect(status == 400 && page.contains("refused the sign-in (&lt;b&gt;no&lt;/b&gt;)"), "\(page)")

            // A sign-in made for another nonce (its authorization request swapped in, PKCE intact) is refused by the
            // ID token's nonce.
            let victim = try await Self.start(api).json
            var swapped = try #require(URLComponents(string: victim["authorizationUrl"] as? String ?? ""))
            swapped.queryItems = swapped.queryItems?.map {
                $0.name == "nonce" ? URLQueryItem(name: "nonce", value: "attacker") : $0
            }
            let (nonceStatus, noncePage) = try await Self.comeBack(
                inProcess, try provider.signIn("nina", password: "nina-pass-1", at: swapped.string ?? ""))
            #expect(nonceStatus == 400 && noncePage.contains("nonce differs"), "\(noncePage)")

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
            let location = try provider.signIn(
                "nina", password: "nina-pass-1", at: pending["authorizationUrl"] as? String ?? "")
            provider.stop()
            let (downStatus, downPage) = try await Self.comeBack(inProcess, location)
            #expect(downStatus == 400 && downPage.contains("cannot be reached"), "\(downPage)")
            let down = try await Self.start(api)
            #expect(down.status == 502 && down.errorCode == "providerUnavailable", "\(down.json)")
            #expect(try inProcess.files.query("SELECT COUNT(*) FROM accounts") == ["0"])
        }
    }

    @Test func aTokenFromAProviderWhoseClockIsTwoHoursBehindHasExpired() async throws {
        let provider = try OpenIDProviderServer(callback: Self.callback, clockOffset: "-2h")
        try await InProcessManager.run(config: try Self.config(provider)) { inProcess in
            let started = try await Self.start(inProcess.api).json
            let (status, page) = try await Self.comeBack(
                inProcess,
                try provider.signIn("nina", password: "nina-pass-1", at: started["authorizationUrl"] as? String ?? ""))
            #expect(status == 400 && page.contains("has expired"), "\(page)")
            #expect(try inProcess.files.query("SELECT COUNT(*) FROM accounts") == ["0"])
        }
    }

    /// A phone with no Linux machine: the manager's registration page in Chromium, the provider's sign-in, and back
    /// to the activation page, where the passkey is made with the PIN chosen at the start.
    @Test func aPhoneRegistersOnTheWebPageAndGetsAPasskey() async throws {
        let port = try ManagerProcess.freePort()
        let url = "http://localhost:\(port)"
        let provider = try OpenIDProviderServer(callback: url + APIPath.providerRegistrationCallback)
        let manager = try ManagerProcess(
            config: try provider.managerConfig(publicURL: url, base: ManagerFiles.testConfig), port: port)
        let phone = Browser(
            in: TemporaryDirectory(), keptIn: OpenAPIValidator.repositoryFile(".build-screenshots/registration"))
        let atProvider = try phone.registerThroughProvider(url + "/register", pin: "24680")
        #expect(atProvider.list("providers") == ["Corp SSO"], "\(atProvider)")
        // The provider's login page carries the authorization request on; the person signs in there.
        let request = try #require(
            URLComponents(string: atProvider["url"])?.queryItems?.first { $0.name == "callback_url" }?.value)
        #expect(request.hasPrefix(provider.issuer + "/auth?"), "\(atProvider)")
        let location = try provider.signIn("nina", password: "nina-pass-1", at: request)
        let activated = try phone.personalize(location, pin: "24680")
        #expect(activated.error.isEmpty && activated["account"].contains("nina@example.org"), "\(activated)")
        #expect(
            try manager.query(
                "SELECT d.key_kind, c.login_name FROM devices d JOIN activations a ON a.id = d.activation_id JOIN accounts c ON c.id = a.account_id"
            )
                == ["passkey|nina"])
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
