import Foundation
import Testing
import XignCrypto
import XignProtocol
import XignTestSupport

/// /v1/api-access and /v1/devices/list over HTTP, every answer checked against docs/openapi.yaml.
@Suite struct ApiAccessAPITests {
    /// Runs an authentication for `purpose` with device and PIN; the signed finish answer.
    func authenticated(
        _ api: API<some ManagerFiles>, _ device: (id: String, key: P256PrivateKey), for purpose: AuthenticationPurpose
    ) async throws -> [String: Any] {
        let started = try await api.postStart(device, purpose: purpose).signedPayload(
            key: try api.managerKey, type: SignedAnswerType.authenticationStart)
        let (id, challenge) = (started["authenticationId"] as? String ?? "", started["challenge"] as? String ?? "")
        let request = AuthenticationFinishRequest(
            authenticationId: id, role: (started["roles"] as? [[String: Any]])?.first?["name"] as? String ?? "",
            factors: [.device, .pin],
            sealedPin: try api.sealed("24680", for: .authentication(id: id, challenge: challenge)),
            attributeValues: [:], attributeSelections: [:],
            nonce: "f")
        let body = try JSONEncoder.canonical.encode(request)
        let answer = try await api.call(
            "POST", APIPath.authenticationFinish, body: body,
            headers: [
                (SignedRequest.signatureHeader, try sign(body, APIPath.authenticationFinish, challenge, device.key))
            ])
        return try answer.signedPayload(key: try api.managerKey, type: SignedAnswerType.authenticationResult)
    }

    /// Confirms `process` with device and PIN; the grant.
    func grant(
        _ api: API<some ManagerFiles>, _ device: (id: String, key: P256PrivateKey), _ process: ApiAccessProcess
    ) async throws -> String {
        let result = try await authenticated(api, device, for: .apiAccess(process: process))
        guard result["outcome"] as? String == "apiAccess", let access = result["apiAccess"] as? [String: Any],
            access["process"] as? String == process.rawValue, let grant = access["grant"] as? String
        else { throw TestFailure("no grant: \(result)") }
        return grant
    }

    /// The purpose decides what an authentication ends in, not a service's name: a configured service named like a
    /// process is a login, and the process is reached only by asking for it.
    @Test func thePurposeNotTheServiceNameDecidesTheOutcome() async throws {
        let config =
            ManagerProcess.testConfig
            + "\n[services]\nnames = change-pin\n[service.change-pin]\nname = Tools\nroles = login\n"
        try await InProcessManager.run(config: config) { inProcess in
            let api = inProcess.api
            let device = try await api.enrolDevice("purpose@example.org")
            let login = try await authenticated(api, device, for: .login(service: "change-pin"))
            #expect(login["outcome"] as? String == "serviceLogin" && login["apiAccess"] == nil, "\(login)")
            #expect((login["serviceLogin"] as? [String: Any])?["service"] as? String == "change-pin")
            // Control: the process, asked for by its purpose, gives its grant.
            await #expect(try !grant(api, device, .changePin).isEmpty)
            // A confirmation code belongs to a confirmation only.
            let stray = try await api.postStart(device, purpose: .login(service: "change-pin"), code: "123456")
            #expect(stray.status == 400, "\(stray.json)")
        }
    }

    func sign(_ body: Data, _ path: String, _ challenge: String, _ key: P256PrivateKey) throws -> String {
        Base64URL.encode(
            try key.signature(
                for: SignedRequest.canonicalMessage(method: "POST", path: path, body: body, challenge: challenge)))
    }

    func finish(
        _ api: API<some ManagerFiles>, _ request: ApiAccessRequest, signer: P256PrivateKey?
    ) async throws -> APIAnswer {
        let body = try JSONEncoder.canonical.encode(request)
        let headers =
            try signer.map { [(SignedRequest.signatureHeader, try sign(body, APIPath.apiAccess, request.grant, $0))] }
            ?? []
        return try await api.call("POST", APIPath.apiAccess, body: body, headers: headers)
    }

    @Test func aGrantNeedsTheDevicesSignatureTheRightFieldAndAValidPINAndIsSpentOnce() async throws {
        try await InProcessManager.run { inProcess in
            let api = inProcess.api
            let device = try await api.enrolDevice("grant-api@example.org")
            let grant = try await grant(api, device, .changePin)
            func newPin(_ pin: String, grant: String = grant) async throws -> SealedPINMessage {
                try api.sealed(pin, for: .grant(grant))
            }
            // A PIN in the clear, or sealed for another grant, is refused before the grant is spent.
            var clear =
                try JSONSerialization.jsonObject(
                    with: JSONEncoder.canonical.encode(ApiAccessRequest(grant: grant, nonce: "n"))) as! [String: Any]
            clear["newPin"] = "97531"
            let clearBody = try JSONSerialization.data(withJSONObject: clear)
            let refused = try await api.call(
                "POST", APIPath.apiAccess, body: clearBody,
                headers: [(SignedRequest.signatureHeader, try sign(clearBody, APIPath.apiAccess, grant, device.key))])
            #expect(refused.status == 400 && refused.errorCode == "securityInsufficient", "\(refused.json)")
            await #expect(
                try finish(
                    api, ApiAccessRequest(grant: grant, nonce: "n", sealedNewPin: newPin("97531", grant: "another")),
                    signer: device.key
                ).status
                    == 400)
            await #expect(
                try finish(api, ApiAccessRequest(grant: grant, nonce: "n", sealedNewPin: newPin("97531")), signer: nil)
                    .status == 401)
            await #expect(
                try finish(
                    api, ApiAccessRequest(grant: grant, nonce: "n", sealedNewPin: newPin("97531")),
                    signer: try P256PrivateKey()
                ).status == 401)
            let wrongField = try await finish(
                api, ApiAccessRequest(grant: grant, nonce: "n", factor: .biometric), signer: device.key)
            #expect(wrongField.status == 400)
            let policy = try await finish(
                api, ApiAccessRequest(grant: grant, nonce: "n", sealedNewPin: newPin("56789")), signer: device.key)
            #expect(
                policy.status == 422 && policy.errorCode == "pinPolicy"
                    && policy.error["pinError"] as? String == "sequence"
            )
            let tooLong = try await finish(
                api,
                ApiAccessRequest(grant: String(repeating: "g", count: 129), nonce: "n", sealedNewPin: newPin("97531")),
                signer: device.key)
            #expect(tooLong.status == 400)

            let changed = try await finish(
                api, ApiAccessRequest(grant: grant, nonce: "n1", sealedNewPin: newPin("97531")), signer: device.key)
            #expect(changed.status == 200, "\(changed.json)")
            let result = try changed.signedPayload(key: try api.managerKey, type: SignedAnswerType.apiAccess)
            #expect(
                result["nonce"] as? String == "n1" && result["activationsWithNewPin"] as? Int == 1
                    && result["deviceId"] as? String == device.id)
            await #expect(
                try finish(
                    api, ApiAccessRequest(grant: grant, nonce: "n2", sealedNewPin: newPin("86420")), signer: device.key
                ).status == 409)
            #expect(
                try await api.authenticate(device, pin: "97531").signedPayload(
                    key: try api.managerKey, type: SignedAnswerType.authenticationResult)["outcome"]
                    as? String == "serviceLogin")

        }
    }

    @Test(arguments: TestDatabase.allCases) func theDeviceListAndEveryProcessAnswerMatchTheSpec(
        database: TestDatabase
    ) async throws {
        try await InProcessManager.run(database: database) { inProcess in
            let api = inProcess.api
            let device = try await api.enrolDevice("spec-api@example.org")
            #expect(try await api.authenticate(device, pin: "24680").status == 200)
            let challenge =
                try await api.post(APIPath.challenges, ChallengeRequest(deviceId: device.id)).json["challenge"]
                as? String
                ?? ""
            let body = try JSONEncoder.canonical.encode(
                AccountDevicesRequest(deviceId: device.id, challenge: challenge, nonce: "d"))
            let listed = try await api.call(
                "POST", APIPath.accountDevices, body: body,
                headers: [
                    (SignedRequest.signatureHeader, try sign(body, APIPath.accountDevices, challenge, device.key))
                ])
            let devices =
                try listed.signedPayload(key: try api.managerKey, type: SignedAnswerType.accountDevices)["devices"]
                as? [[String: Any]]
            #expect(
                devices?.count == 1 && devices?.first?["name"] as? String == "test-host"
                    && devices?.first?["lastUsedAt"] is Int)

            let added = try await finish(
                api, ApiAccessRequest(grant: try grant(api, device, .addFactor), nonce: "a", factor: .biometric),
                signer: device.key)
            #expect(
                try added.signedPayload(key: try api.managerKey, type: SignedAnswerType.apiAccess)["factors"]
                    as? [String]
                    == [
                        "device", "pin", "biometric",
                    ])
            let newActivationGrant = try await grant(api, device, .requestNewActivation)
            let trigger = NewActivationMessage(
                sealedPin: try api.sealed("25814", for: .grant(newActivationGrant)), alias: "Other",
                shouldSendEmail: false)
            let made = try await finish(
                api, ApiAccessRequest(grant: newActivationGrant, nonce: "r", newActivation: trigger), signer: device.key
            )
            #expect(
                (try made.signedPayload(key: try api.managerKey, type: SignedAnswerType.apiAccess)["newActivation"]
                    as? [String: Any])?["alias"]
                    as? String == "Other")
            let deleted = try await finish(
                api, ApiAccessRequest(grant: try grant(api, device, .delete), nonce: "x"), signer: device.key)
            #expect(
                try deleted.signedPayload(key: try api.managerKey, type: SignedAnswerType.apiAccess)["revokedDevices"]
                    as? Int == 1)
            #expect(
                try await api.post(APIPath.challenges, ChallengeRequest(deviceId: device.id)).status == 404,
                "no challenge for a device that is gone")
            for table in ["accounts", "activations", "devices", "authentications"] {
                #expect(
                    try api.manager.query("SELECT COUNT(*) FROM \(table)").map {
                        $0.trimmingCharacters(in: .whitespaces)
                    }
                        == ["0"], "\(table)")
            }
            // The audit stays, the address in it replaced by a keyed hash: nothing names the account any more.
            let audit = try api.manager.query(
                "SELECT event || ' ' || COALESCE(email, '-') FROM audit_events ORDER BY at")
            #expect(audit.count > 1 && audit.last?.hasPrefix("accountDeleted deleted-") == true, "\(audit)")
            #expect(!audit.joined().contains("@"), "\(audit)")
            // Whoever knows the address finds the entries by it; another address finds none.
            let found = try api.manager.admin(["audit", "--email", "Spec-API@example.org", "--json"])
            let entries = try JSONSerialization.jsonObject(with: Data(found.stdout.utf8)) as? [[String: Any]] ?? []
            #expect(
                entries.count == audit.count && entries.last?["event"] as? String == "accountDeleted",
                "\(found.stdout.prefix(300))")
            let none = try api.manager.admin(["audit", "--email", "other@example.org", "--json"]).stdout
            #expect((try JSONSerialization.jsonObject(with: Data(none.utf8)) as? [Any])?.isEmpty == true, "\(none)")

        }
    }
}
