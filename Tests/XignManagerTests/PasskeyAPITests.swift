import Foundation
import NIOConcurrencyHelpers
import Testing
import XignCrypto
import XignProtocol
import XignTestSupport

/// A browser's passkey as a device, through the real manager: enrolment, the one-request approval, and every
/// forgery a relaying page or a copied authenticator brings, each beside a control that passes. The software
/// authenticator stands in for the browser only where a browser would not let a test forge (the browser tests drive
/// the same paths with Chromium).
@Suite struct PasskeyAPITests {
    /// Registers `email` and personalizes `passkey` for it; the answer of the passkey personalization.
    static func enrol(
        _ api: API<some ManagerFiles>, _ email: String, _ passkey: SoftwarePasskey, origin: String? = nil
    ) async throws -> APIAnswer {
        let decrypted = try await api.decrypt(try await api.register(email), pin: "24680").signedPayload(
            key: try api.managerKey, type: SignedAnswerType.decrypt)
        let session = try #require(decrypted["session"] as? [String: Any])
        let challenge = try #require(Base64URL.decode(session["challenge"] as? String ?? ""))
        let (object, clientData) = try passkey.register(
            challenge: challenge, origin: origin ?? api.site.origin, rpId: api.site.rpId)
        return try await api.post(
            APIPath.passkeyPersonalizations,
            PasskeyPersonalizeRequest(
                sessionId: session["id"] as? String ?? "", mode: .new,
                device: DeviceInformationMessage(name: "Passkey in a browser", platform: "browser"),
                nonce: "pk", attestationObject: Base64URL.encode(object), clientDataJSON: Base64URL.encode(clientData)))
    }

    /// The account's device list, asked for by `deviceId` with an assertion of `passkey` in place of a signature.
    static func listDevices(
        _ api: API<some ManagerFiles>, _ deviceId: String, signedBy passkey: SoftwarePasskey
    ) async throws -> APIAnswer {
        let challenge = try #require(
            try await api.post(APIPath.challenges, ChallengeRequest(deviceId: deviceId)).json["challenge"]
                as? String)
        let body = try JSONEncoder.canonical.encode(
            AccountDevicesRequest(deviceId: deviceId, challenge: challenge, nonce: "l"))
        let (origin, rpId) = api.site
        let header = try passkey.sign(
            path: APIPath.accountDevices, body: body, challenge: challenge, origin: origin, rpId: rpId)
        return try await api.call(
            "POST", APIPath.accountDevices, body: body, headers: [(SignedRequest.signatureHeader, header)])
    }

    static func deviceId(_ api: API<some ManagerFiles>, _ answer: APIAnswer) throws -> String {
        try #require(
            try answer.signedPayload(key: try api.managerKey, type: SignedAnswerType.personalization)["deviceId"]
                as? String)
    }

    @Test(arguments: TestDatabase.allCases) func aPasskeyBecomesADeviceThatSignsTheDeviceAPI(
        database: TestDatabase
    ) async throws {
        try await InProcessManager.run(database: database) { inProcess in
            let api = inProcess.api
            let passkey = try SoftwarePasskey()
            let deviceId = try await Self.deviceId(api, try Self.enrol(api, "alice@example.org", passkey))
            let row = try api.manager.query(
                "SELECT key_kind, credential_id, sign_count, backup_eligible, backed_up FROM devices")
            #expect(row == ["passkey|\(Base64URL.encode(passkey.credentialId))|0|0|0"])
            #expect(
                try api.manager.query("SELECT detail FROM audit_events WHERE event = 'enrolment'").first?.contains(
                    "passkey, device Passkey in a browser, credential") == true)
            // The device API takes its assertion where a machine's signature goes: the account's device list.
            let list = try await Self.listDevices(api, deviceId, signedBy: passkey).signedPayload(
                key: try api.managerKey, type: SignedAnswerType.accountDevices)
            let devices = try #require(list["devices"] as? [[String: Any]])
            #expect(devices.map { $0["keyKind"] as? String } == ["passkey"])
            #expect(try api.manager.query("SELECT sign_count FROM devices") == ["1"])
            // A passkey serves one activation: the same credential for a second account is refused.
            let again = try await Self.enrol(api, "bob@example.org", passkey)
            #expect(again.status == 409 && again.errorCode == "conflict")
            // A passkey made at another origin never enrols.
            let elsewhere = try await Self.enrol(
                api, "carol@example.org", try SoftwarePasskey(), origin: "https://idm.example.net")
            #expect(elsewhere.status == 401 && elsewhere.errorCode == "signatureInvalid")

        }
    }

    @Test func aSyncedPasskeyIsRefusedWhereHardwareKeysAreRequired() async throws {
        try await InProcessManager.run(config: ManagerProcess.testConfig + "\n[policy]\nrequire_hardware_key = true\n")
        { inProcess in
            let api = inProcess.api
            let synced = try await Self.enrol(api, "alice@example.org", try SoftwarePasskey(synced: true))
            #expect(synced.status == 403 && synced.errorCode == "securityInsufficient")
            // The control: a device-bound passkey (no backup flags) is a hardware key.
            await #expect(try Self.enrol(api, "bob@example.org", try SoftwarePasskey()).status == 200)
        }
    }

    /// G6: "synced" is backup eligible or backed up, whenever it is judged, and the BE flag an assertion carries must
    /// be the one the passkey was enrolled with (WebAuthn L3 §7.2). Each refusal beside a device-bound control.
    @Test(.machineShare) func theBackupEligibleFlagIsFixedAndEitherFlagMeansSynced() async throws {
        let api = API(manager: try ManagerProcess())
        func devices(_ passkey: SoftwarePasskey, _ deviceId: String) async throws -> APIAnswer {
            try await Self.listDevices(api, deviceId, signedBy: passkey)
        }
        let bound = try SoftwarePasskey()
        let boundId = try await Self.deviceId(api, try Self.enrol(api, "bound@example.org", bound))
        let eligible = try SoftwarePasskey()
        eligible.flags |= 0x08  // BE, not yet backed up
        let eligibleId = try await Self.deviceId(api, try Self.enrol(api, "eligible@example.org", eligible))
        await #expect(try devices(bound, boundId).status == 200)
        await #expect(try devices(eligible, eligibleId).status == 200)

        // The BE flag changes: a different authenticator behind the same credential.
        bound.flags |= 0x08
        let turned = try await devices(bound, boundId)
        #expect(turned.status == 401 && turned.errorCode == "signatureInvalid", "\(turned.json)")
        #expect((turned.error["message"] as? String ?? "").contains("backup eligible yes, but it was enrolled with no"))
        bound.flags &= ~0x08
        await #expect(try devices(bound, boundId).status == 200, "control: the flag it was enrolled with")

        // The policy tightens after both enrolled: the eligible passkey counts as synced though it was never backed up.
        api.manager.stop()
        let config = try String(contentsOfFile: api.manager.configPath, encoding: .utf8)
        try writeTestFile(
            api.manager.configPath, Data((config + "\n[policy]\nrequire_hardware_key = tpm\n").utf8), mode: 0o600)
        try api.manager.start()
        let refused = try await devices(eligible, eligibleId)
        #expect(refused.status == 403 && refused.errorCode == "securityInsufficient", "\(refused.json)")
        await #expect(try devices(bound, boundId).status == 200, "control: the device-bound passkey")
    }

    @Test(arguments: TestDatabase.allCases) func aPasskeyApprovesALoginInOneRequestAndNoForgeryDoes(
        database: TestDatabase
    ) async throws {
        try await InProcessManager.run(database: database) { inProcess in
            let api = inProcess.api
            let (origin, rpId) = api.site
            let passkey = try SoftwarePasskey()
            let deviceId = try await Self.deviceId(api, try Self.enrol(api, "alice@example.org", passkey))
            let stranger = try SoftwarePasskey()
            _ = try await Self.deviceId(api, try Self.enrol(api, "mallory@example.org", stranger))
            try api.manager.giveLogin("alice@example.org", "alice")
            let host = try await JoinedHost(api)
            let started = try await host.start("alice").signedPayload(
                key: try api.managerKey, type: SignedAnswerType.confirmationStart)
            let id = try #require(started["confirmationId"] as? String), code = try #require(started["code"] as? String)

            let view = try await api.post(APIPath.confirmationView, ConfirmationViewRequest(confirmationId: id)).json
            #expect(
                view["host"] as? String == "web1" && view["loginName"] as? String == "alice"
                    && view["state"] as? String == "pending")
            #expect(view["code"] == nil, "the page shows no code: the user types the one the server shows")
            #expect(
                try await api.post(
                    APIPath.confirmationView, ConfirmationViewRequest(confirmationId: "AAAAAAAAAAAAAAAAAAAAAAAAAA")
                ).status == 404)

            /// One approval request; `sign` makes its signature header from the body and the challenge.
            func approval(
                pin: String = "24680", code: String? = nil, sign: (Data, String) throws -> String
            ) async throws -> APIAnswer {
                let challenge = try #require(
                    try await api.post(APIPath.challenges, ChallengeRequest(deviceId: deviceId)).json["challenge"]
                        as? String)
                let body = try JSONEncoder.canonical.encode(
                    ConfirmationApprovalRequest(
                        deviceId: deviceId, challenge: challenge, confirmationId: id,
                        confirmationCode: code ?? started["code"] as? String ?? "",
                        sealedPin: try api.sealed(pin, for: .approval(confirmationId: id, challenge: challenge)),
                        nonce: "a"
                    ))
                return try await api.call(
                    "POST", APIPath.confirmationApproval, body: body,
                    headers: [(SignedRequest.signatureHeader, try sign(body, challenge))])
            }
            func signed(
                by key: SoftwarePasskey, origin: String = origin, rpId: String = rpId
            ) -> (Data, String) throws -> String {
                { body, challenge in
                    try key.sign(
                        path: APIPath.confirmationApproval, body: body, challenge: challenge, origin: origin, rpId: rpId
                    )
                }
            }
            // One accepted request first, so the stored counter stands at 11.
            passkey.signCount = 10
            let listChallenge = try #require(
                try await api.post(APIPath.challenges, ChallengeRequest(deviceId: deviceId)).json["challenge"]
                    as? String)
            let listBody = try JSONEncoder.canonical.encode(
                AccountDevicesRequest(deviceId: deviceId, challenge: listChallenge, nonce: "l"))
            let listed = try await api.call(
                "POST", APIPath.accountDevices, body: listBody,
                headers: [
                    (
                        SignedRequest.signatureHeader,
                        try passkey.sign(
                            path: APIPath.accountDevices, body: listBody, challenge: listChallenge, origin: origin,
                            rpId: rpId)
                    )
                ])
            #expect(listed.status == 200)
            var replayed: (Data, String)?
            let forgeries: [(String, String, (Data, String) throws -> String)] = [
                // A page of another origin on the same host name may ask for this RP id's passkey; its origin gives it away.
                ("another origin", "another origin", signed(by: passkey, origin: "http://127.0.0.1:1")),
                ("another RP id", "another site", signed(by: passkey, rpId: "evil.example")),
                ("another account's passkey", "does not verify", signed(by: stranger)),
                (
                    "a counter that went back", "did not grow",
                    { body, challenge in
                        passkey.signCount = 2
                        defer { passkey.signCount = 20 }
                        return try passkey.sign(
                            path: APIPath.confirmationApproval, body: body, challenge: challenge, origin: origin,
                            rpId: rpId
                        )
                    }
                ),
                (
                    "a machine's signature in place of an assertion", "WebAuthn assertion",
                    { _, _ in Base64URL.encode(Data(count: 64)) }
                ),
            ]
            for (what, reason, forge) in forgeries {
                let refused = try await approval(sign: forge)
                #expect(refused.status == 401 && refused.errorCode == "signatureInvalid", "\(what): \(refused.json)")
                #expect((refused.error["message"] as? String)?.contains(reason) == true, "\(what): \(refused.json)")
            }
            #expect(
                try api.manager.query("SELECT code_failures, state FROM confirmations") == ["0|pending"],
                "no forgery reaches the code")
            // A wrong PIN charges the lockout, like every login.
            let wrong = try await approval(pin: "13579", sign: signed(by: passkey))
            let lock = try wrong.signedPayload(key: try api.managerKey, type: SignedAnswerType.confirmationApproval)
            #expect(lock["outcome"] as? String == "lockout")
            #expect(
                try api.manager.query(
                    "SELECT failed_attempts FROM activations a JOIN devices d ON d.activation_id = a.id WHERE d.id = '\(deviceId)'"
                )
                    == ["1"])
            try await Task.sleep(for: .seconds(0.4))  // the test config's first lock: 300 ms
            // The control: the device's own passkey at the manager's origin, the right code and PIN.
            let approved = try await approval { body, challenge in
                let header = try passkey.sign(
                    path: APIPath.confirmationApproval, body: body, challenge: challenge, origin: origin, rpId: rpId)
                replayed = (body, header)
                return header
            }
            let answer = try approved.signedPayload(
                key: try api.managerKey, type: SignedAnswerType.confirmationApproval)
            #expect(
                answer["outcome"] as? String == "approved" && answer["host"] as? String == "web1", "\(approved.json)")
            let waited = try await api.post(
                APIPath.confirmationWait,
                ConfirmationWaitRequest(
                    confirmationId: id, waitToken: started["waitToken"] as? String ?? "", waitMilliseconds: 0)
            ).signedPayload(key: try api.managerKey, type: SignedAnswerType.confirmationResult)
            #expect(waited["state"] as? String == "approved" && waited["approvedBy"] as? String == deviceId)
            // The same assertion again: its counter no longer grows.
            let (body, header) = try #require(replayed)
            let replay = try await api.call(
                "POST", APIPath.confirmationApproval, body: body, headers: [(SignedRequest.signatureHeader, header)])
            #expect(
                replay.status == 401 && (replay.error["message"] as? String)?.contains("did not grow") == true,
                "\(replay.json)")
            _ = code

        }
    }

    /// One assertion sent twice at the same moment: the counter moves once, so exactly one request is served.
    @Test(arguments: TestDatabase.allCases) func oneAssertionSentTwiceAtOnceIsServedOnce(
        database: TestDatabase
    ) async throws {
        try await InProcessManager.run(database: database) { inProcess in
            let api = inProcess.api
            let (origin, rpId) = api.site
            let passkey = try SoftwarePasskey()
            let deviceId = try await Self.deviceId(api, try Self.enrol(api, "alice@example.org", passkey))
            for _ in 0..<5 {
                let challenge = try #require(
                    try await api.post(APIPath.challenges, ChallengeRequest(deviceId: deviceId)).json["challenge"]
                        as? String)
                let body = try JSONEncoder.canonical.encode(
                    AccountDevicesRequest(deviceId: deviceId, challenge: challenge, nonce: "l"))
                let header = try passkey.sign(
                    path: APIPath.accountDevices, body: body, challenge: challenge, origin: origin, rpId: rpId)
                let statuses = NIOLockedValueBox<[Int]>([])
                _ = try await inParallel(2) { _ in
                    let status =
                        (try? await api.call(
                            "POST", APIPath.accountDevices, body: body,
                            headers: [(SignedRequest.signatureHeader, header)]
                        ).status) ?? 0
                    statuses.withLockedValue { $0.append(status) }
                }
                #expect(statuses.withLockedValue { $0.sorted() } == [200, 401], "one served, one refused")
            }

        }
    }
}
