import Foundation
import Testing
import XignCrypto
import XignProtocol
import XignTestSupport

/// `keys.pin_pepper = tpm`: the pepper is an HMAC key inside the manager machine's TPM (swtpm here).
@Suite(.machineShare) struct TPMPepperTests {
    static func config(_ tpm: SoftwareTPM, iterations: Int = 2000) -> String {
        ManagerProcess.testConfig.replacingOccurrences(
            of: "hash_iterations = 2000", with: "hash_iterations = \(iterations)")
            + "\n[keys]\npin_pepper = tpm\ntcti = \(tpm.tcti)\n"
    }

    func verifierRow(_ manager: ManagerProcess, _ activationId: String) throws -> [String] {
        let row = try manager.query(
            "SELECT pin_pepper || '|' || CAST(pin_iterations AS TEXT) || '|' || pin_verifier FROM activations WHERE id = '\(activationId)'"
        )
        return try #require(row.first).split(separator: "|").map(String.init)
    }

    /// The decrypt's outcome for `pin` ("lockout" for a wrong PIN), after waiting out a lock the last one caused.
    func check(_ api: API<some ManagerFiles>, _ payload: PersonalizationPayload, _ pin: String) async throws -> String {
        var answer = try await api.decrypt(payload, pin: pin)
        while answer.status == 423 {
            let until = (answer.error["lockout"] as? [String: Any])?["lockedUntil"] as? Double ?? 0
            try await sleep(pastEpochMilliseconds: until)
            answer = try await api.decrypt(payload, pin: pin)
        }
        return try answer.signedPayload(key: try api.managerKey, type: SignedAnswerType.decrypt)["outcome"] as? String
            ?? "status \(answer.status)"
    }

    @Test func aTPMPepperedManagerChecksPINsAndACopyOfItsFilesOnAnotherMachineChecksNone() async throws {
        let tpm = try SoftwareTPM()
        let manager = try ManagerProcess(config: Self.config(tpm))
        let api = API(manager: manager)
        let payload = try await api.register("tpm@example.org")
        #expect(try verifierRow(manager, payload.activationId).prefix(2) == ["tpm", "2000"])
        #expect(
            !FileManager.default.fileExists(atPath: manager.dataDirectory + "/pin-pepper"), "no pepper file is made")
        await #expect(try check(api, payload, "13579") == "lockout")
        await #expect(try check(api, payload, "24680") == "newPersonalization")

        // Everything on the manager's disk, copied to another machine (another TPM): the blob does not load there,
        // so the copy refuses to start instead of checking PINs, and nothing in the files reproduces a verifier.
        manager.stop()
        let other = try SoftwareTPM()
        let copy = TemporaryDirectory()
        try FileManager.default.copyItem(atPath: manager.dataDirectory, toPath: copy.file("manager"))
        try writeTestFile(copy.file("manager.conf"), Data(Self.config(other).utf8))
        let refused = try ChildProcess(
            try Products.path("xign-manager"),
            [
                "serve", "--config", copy.file("manager.conf"), "--data-dir", copy.file("manager"), "--listen",
                "127.0.0.1:0",
            ], in: copy
        ).wait()
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("does not load"), "\(refused.stderr)")
        let stored = try #require(Base64URL.decode(try verifierRow(manager, payload.activationId)[2]))
        let saltText =
            try manager.query("SELECT pin_salt FROM activations WHERE id = '\(payload.activationId)'").first ?? ""
        let salt = try #require(Base64URL.decode(saltText))
        let stretched = try PBKDF2.deriveKey(password: Data("24680".utf8), salt: salt, iterations: 2000)
        for name in try FileManager.default.contentsOfDirectory(atPath: copy.file("manager")) {
            let bytes = [UInt8]((try? Data(contentsOf: URL(fileURLWithPath: copy.file("manager/\(name)")))) ?? Data())
            // Every 32-byte window of every file, tried as an HMAC key, as an attacker with the copy would.
            for start in stride(from: 0, through: max(bytes.count - 32, -1), by: 1) where bytes.count >= 32 {
                #expect(HMACSHA256.authenticationCode(for: stretched, key: Data(bytes[start..<start + 32])) != stored)
            }
        }

        // The same files on the machine whose TPM made the key check PINs again.
        try manager.start()
        await #expect(try check(api, payload, "24680") == "newPersonalization")
    }

    @Test func anOldVerifierIsMadeAgainWithTheCurrentCostAndPepperAtTheNextRightPIN() async throws {
        let manager = try ManagerProcess()
        let api = API(manager: manager)
        let payload = try await api.register("upgrade@example.org")
        let old = try verifierRow(manager, payload.activationId)
        #expect(old.prefix(2) == ["file", "2000"])

        manager.stop()
        let tpm = try SoftwareTPM()
        try writeTestFile(manager.configPath, Data(Self.config(tpm, iterations: 3000).utf8))
        try manager.start()
        // A wrong PIN is only charged: the old verifier stays.
        await #expect(try check(api, payload, "13579") == "lockout")
        #expect(try verifierRow(manager, payload.activationId) == old)
        await #expect(try check(api, payload, "24680") == "newPersonalization")
        let upgraded = try verifierRow(manager, payload.activationId)
        #expect(upgraded.prefix(2) == ["tpm", "3000"])
        #expect(upgraded[2] != old[2])
        // The new verifier checks both ways, and a new registration is made the current way at once.
        await #expect(try check(api, payload, "13579") == "lockout")
        await #expect(try check(api, payload, "24680") == "newPersonalization")
        let fresh = try await api.register("fresh@example.org")
        #expect(try verifierRow(manager, fresh.activationId).prefix(2) == ["tpm", "3000"])
    }
}
