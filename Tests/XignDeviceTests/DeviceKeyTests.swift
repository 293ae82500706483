import Foundation
import Testing
import XignTestSupport

@testable import XignDevice

@Suite struct TPMFailureTests {
    @Test(arguments: [
        (UInt32(0x0000_0921), TPMFailure.lockout),  // TPM_RC_LOCKOUT
        (UInt32(0x0000_0922), .busy("")),  // TPM_RC_RETRY
        (UInt32(0x0000_0902), .busy("")),  // TPM_RC_OBJECT_MEMORY: full object slots, no resource manager
        (UInt32(0x0000_01DF), .keyDoesNotLoad("")),  // TPM_RC_INTEGRITY on parameter 1: another seed
        (UInt32(0x0000_09A2), .ownerAuthorization),  // TPM_RC_BAD_AUTH on session 1
        (UInt32(0x000A_000A), .unavailable("")),  // TCTI: IO error
        (UInt32(0x000A_0009), .busy("")),  // TCTI: try again
        (UInt32(0x000C_0921), .lockout),  // LOCKOUT passed on by the resource manager
        (UInt32(0x5849_0001), .cleared),  // XIGN_TPM_RC_SRK_MISMATCH
    ])
    func returnCodesMapToWhatTheUserCanDo(rc: UInt32, expected: TPMFailure) {
        let failure = TPMFailure.from(rc)
        switch (failure, expected) {
        case (.busy, .busy), (.unavailable, .unavailable), (.keyDoesNotLoad, .keyDoesNotLoad): break
        default: #expect(failure == expected, "0x\(String(rc, radix: 16)) → \(failure)")
        }
        #expect(!failure.description.isEmpty)
    }
}

@Suite struct TPMDeviceKeyStoreTests {
    @Test func anOwnerPasswordIsNamed() throws {
        let tpm = try SoftwareTPM()
        let directory = TemporaryDirectory()
        let store = TPMDeviceKeyStore(directory: directory.path, tcti: tpm.tcti)
        #expect(throws: Never.self) { _ = try store.createPendingKey() }
        try tpm.tool("tpm2_changeauth", ["-c", "owner", "admin-secret"])
        #expect(throws: TPMFailure.ownerAuthorization) { _ = try store.createPendingKey() }
        // Hierarchy authorizations are not dictionary-attack protected and the keys are noDA,
        // so failing again does not lock the TPM: the same error, not TPM_RC_LOCKOUT.
        #expect(throws: TPMFailure.ownerAuthorization) { _ = try store.createPendingKey() }
    }

    @Test func aPersistentSRKIsUsedOnlyWhenItIsTheKeysOwn() throws {
        let tpm = try SoftwareTPM()
        let directory = TemporaryDirectory()
        let store = TPMDeviceKeyStore(directory: directory.path, tcti: tpm.tcti)
        let (key, reference) = try store.createPendingKey()
        // Someone persisted a different primary (an RSA one) at 0x81000001: its name differs, so the key's own SRK is derived instead.
        try tpm.tool("tpm2_createprimary", ["-C", "o", "-G", "rsa", "-c", directory.file("rsa.ctx")])
        try tpm.tool("tpm2_evictcontrol", ["-C", "o", "-c", directory.file("rsa.ctx"), "0x81000001"])
        try tpm.tool("tpm2_flushcontext", ["--transient-object"])  // no resource manager in front of swtpm
        let message = Data("persistent".utf8)
        #expect(try key.publicKey.isValidSignature(try store.load(reference).signature(for: message), for: message))
    }

    @Test func aDamagedKeyFileIsRefusedWithoutTheTPM() throws {
        let directory = TemporaryDirectory()
        let store = TPMDeviceKeyStore(directory: directory.path, tcti: "swtpm:path=\(directory.file("none"))")
        for (name, contents) in [
            ("empty", ""), ("foreign", "-----BEGIN PRIVATE KEY-----"), ("truncated", "XIGNTPM1\u{0}\u{40}abc"),
        ] {
            _ = try directory.write("\(name).tpm", contents)
            #expect(throws: (any Error).self) { _ = try store.load(name) }
        }
    }
}

@Suite struct SoftwareDeviceKeyStoreTests {
    @Test func pendingKeysAreCommittedOrDeletedAndStayPrivate() throws {
        let directory = TemporaryDirectory()
        let store = SoftwareDeviceKeyStore(directory: directory.file("keys"))
        let (key, pending) = try store.createPendingKey()
        #expect(pending.hasPrefix("pending-"))
        try store.commit(pending: pending, as: "device1")
        let loaded = try store.load("device1")
        let message = Data("m".utf8)
        #expect(try key.publicKey.isValidSignature(try loaded.signature(for: message), for: message))
        #expect(
            try FileManager.default.attributesOfItem(atPath: directory.file("keys/device1.pem"))[.posixPermissions]
                as? Int == 0o600)
        try store.delete("device1")
        #expect(throws: DeviceKeyError.self) { _ = try store.load("device1") }
        #expect(throws: DeviceKeyError.self) { _ = try store.load("../etc/passwd") }
    }

    /// A key never lands on another's file: committing under a name in use fails and leaves both keys as they were.
    @Test func aNewKeyNeverReplacesAnExistingKeyFile() throws {
        let directory = TemporaryDirectory()
        let store = SoftwareDeviceKeyStore(directory: directory.file("keys"))
        let (first, pending) = try store.createPendingKey()
        try store.commit(pending: pending, as: "taken")
        let (_, second) = try store.createPendingKey()
        #expect(throws: DeviceKeyError.self) { try store.commit(pending: second, as: "taken") }
        #expect(try store.load("taken").publicKey == first.publicKey, "the first key is untouched")
        try store.commit(pending: second, as: "free")
        #expect(try store.load("free").publicKey != first.publicKey, "the control: a free name takes the key")
    }
}

@Suite struct TPMPINVerifierTests {
    /// A TPM that forgets a failure only after ten minutes, so the counter stays where a test left it, and whose
    /// lockout authorization the organization set ("secret"), so the test can reset the count.
    static func strictTPM() throws -> SoftwareTPM {
        let tpm = try SoftwareTPM()
        try tpm.tool(
            "tpm2_dictionarylockout",
            ["--setup-parameters", "--max-tries=4", "--recovery-time=600", "--lockout-recovery-time=600"])
        try tpm.tool("tpm2_changeauth", ["-c", "lockout", "secret"])
        return tpm
    }

    static let week: Int64 = 7 * 86_400_000
    static let right = Data(repeating: 7, count: 32), wrong = Data(repeating: 8, count: 32)

    /// A verifier of `right` in a strict TPM, valid for `grace` on its Clock.
    struct Verifier {
        let tpm: SoftwareTPM
        let directory = TemporaryDirectory()
        let store: TPMPINVerifierStore
        let reference: String
        let deadline: UInt64

        init(grace: Int64 = TPMPINVerifierTests.week) throws {
            tpm = try TPMPINVerifierTests.strictTPM()
            store = TPMPINVerifierStore(directory: directory.path, tcti: tpm.tcti)
            (reference, deadline) = try store.create(
                authorization: TPMPINVerifierTests.right, beside: "key", graceMilliseconds: grace,
                policy: .organization)
        }

        func check(_ authorization: Data) throws -> Bool {
            try store.check(reference, authorization: authorization, deadline: deadline)
        }
    }

    @Test func theTPMCountsEveryWrongValueAndLocksPastItsMaximum() throws {
        let verifier = try Verifier()
        let (tpm, store, right, wrong) = (verifier.tpm, verifier.store, Self.right, Self.wrong)
        #expect(
            try store.lockoutState()
                == TPMLockoutState(
                    failures: 0, maxTries: 4, recoverySeconds: 600, lockoutRecoverySeconds: 600, isLockedOut: false,
                    lockoutAuthorizationSet: true))
        #expect(try verifier.check(right))
        #expect(try store.lockoutState().failures == 0)
        #expect(try !verifier.check(wrong))
        #expect(try store.lockoutState().failures == 1)
        // The right value still works below the maximum, and does not reset the TPM's count.
        #expect(try verifier.check(right))
        #expect(try store.lockoutState().failures == 1)
        for _ in 0..<3 { #expect(try !verifier.check(wrong)) }
        #expect(try store.lockoutState().isLockedOut)
        // In lockout the TPM refuses even the right value, without looking at it.
        #expect(throws: TPMFailure.lockout) { _ = try verifier.check(right) }
        try tpm.tool("tpm2_dictionarylockout", ["--clear-lockout", "-p", "secret"])
        #expect(try verifier.check(right))
    }

    /// G1: with the lockout authorization xign set and forgot, root has no way to reset the count or switch the
    /// protection off; on the same TPM before, both worked with the empty authorization.
    @Test func aTakenLockoutLeavesRootNoResetOfTheCount() throws {
        let tpm = try SoftwareTPM()
        try tpm.countFailuresStrictly()
        // Control: the empty authorization works as on most Linux machines.
        try tpm.tool("tpm2_dictionarylockout", ["--clear-lockout"])
        let directory = TemporaryDirectory()
        let store = TPMPINVerifierStore(directory: directory.path, tcti: tpm.tcti)
        let right = Data(repeating: 7, count: 32)
        #expect(throws: TPMFailure.self, "leave: an empty lockout authorization makes no verifier") {
            _ = try store.create(authorization: right, beside: "key", graceMilliseconds: Self.week, policy: .leave)
        }
        #expect(try !store.lockoutState().lockoutAuthorizationSet, "leave changes nothing")
        let (reference, deadline) = try store.create(
            authorization: right, beside: "key", graceMilliseconds: Self.week, policy: .take)
        #expect(try store.lockoutState().lockoutAuthorizationSet)
        #expect(try !store.check(reference, authorization: Data(repeating: 8, count: 32), deadline: deadline))
        #expect(throws: TestFailure.self) { try tpm.tool("tpm2_dictionarylockout", ["--clear-lockout"]) }
        #expect(throws: TestFailure.self) {
            try tpm.tool("tpm2_dictionarylockout", ["--setup-parameters", "--recovery-time=0"])
        }
        #expect(try store.lockoutState().failures == 1, "the wrong value stays counted")
        #expect(try store.standing(policy: .take).unprotectedBecause == nil)
        #expect(
            try store.standing(policy: .leave).unprotectedBecause == nil,
            "xign's own lockout is trusted under leave too")
        // Cleared in the firmware: a new seed, an empty lockout authorization, and the old verifier is gone.
        try tpm.clear()
        #expect(throws: TPMFailure.cleared) { _ = try store.check(reference, authorization: right, deadline: deadline) }
        #expect(try store.standing(policy: .leave).unprotectedBecause != nil)
    }

    @Test func aLockoutSetByAnotherProgramIsTrustedOnlyWhenTheOrganizationHoldsIt() throws {
        let tpm = try Self.strictTPM()
        let directory = TemporaryDirectory()
        let store = TPMPINVerifierStore(directory: directory.path, tcti: tpm.tcti)
        let right = Data(repeating: 7, count: 32)
        for policy in [TPMLockoutPolicy.take, .leave] {
            #expect(throws: TPMFailure.self) {
                _ = try store.create(authorization: right, beside: "key", graceMilliseconds: Self.week, policy: policy)
            }
            #expect(try store.standing(policy: policy).unprotectedBecause?.contains("set by another program") == true)
        }
        // Control: the organization says it holds it.
        #expect(throws: Never.self) {
            _ = try store.create(
                authorization: right, beside: "key", graceMilliseconds: Self.week, policy: .organization)
        }
        // Protection switched off by whoever holds it: no verifier, whatever the policy.
        try tpm.tool("tpm2_dictionarylockout", ["--setup-parameters", "--recovery-time=0", "-p", "secret"])
        #expect(try store.standing(policy: .organization).unprotectedBecause?.contains("recovery time 0") == true)
        #expect(throws: TPMFailure.self) {
            _ = try store.create(
                authorization: right, beside: "key", graceMilliseconds: Self.week, policy: .organization)
        }
    }

    /// G2: the grace is in the verifier's policy on the TPM's Clock, which no clock on the machine sets back.
    @Test func theTPMRefusesTheVerifierPastItsClockDeadlineAndCountsNothing() throws {
        let verifier = try Verifier(grace: 3_600_000)
        let (store, reference, deadline) = (verifier.store, verifier.reference, verifier.deadline)
        #expect(try verifier.check(Self.right), "control: within the grace")
        // A deadline written further out (root editing the state file) is not the policy the verifier carries.
        #expect(throws: TPMFailure.self) {
            _ = try store.check(reference, authorization: Self.right, deadline: deadline + 86_400_000)
        }
        try verifier.tpm.advanceClock(byMilliseconds: 3_600_000)
        #expect(throws: TPMFailure.graceOver) { _ = try verifier.check(Self.right) }
        #expect(throws: TPMFailure.graceOver) { _ = try verifier.check(Self.wrong) }
        #expect(try store.lockoutState().failures == 0, "past the deadline no value reaches the authorization check")
    }

    /// H3: root holding the right value (a guessed PIN) tries it with TPM2_ObjectChangeAuth in a password session, the
    /// ADMIN role, which runs no policy: no grace and no safe Clock. The verifier's adminWithPolicy refuses that, and
    /// so does a policy session that satisfies the verifier's policy, which has no TPM2_PolicyCommandCode. Control: an
    /// object as the verifiers were before (the same policy, no adminWithPolicy), made with tpm2-tools, lets the same
    /// command through.
    @Test func objectChangeAuthTestsNoPINPastTheVerifiersPolicy() throws {
        let verifier = try Verifier()
        let (tpm, directory, right, reference, deadline) = (
            verifier.tpm, verifier.directory, Self.right, verifier.reference, verifier.deadline
        )
        let (publicArea, privateArea) = try Self.parts(ofKeyFile: directory.file("\(reference).pinverifier"))
        let srk = try tpm.storageRootKey()
        let loaded = try tpm.load(publicArea: publicArea, privateArea: privateArea, under: srk)
        let value = "hex:" + right.map { String(format: "%02x", $0) }.joined()
        func changeAuth(_ object: String, _ authorization: String) throws {
            try tpm.flushTransients()
            try tpm.tool(
                "tpm2_changeauth",
                ["-c", object, "-C", srk, "-p", authorization, "-r", tpm.directory.file("changed.priv"), "new"])
        }
        #expect(throws: TestFailure.self, "a password session") { try changeAuth(loaded, value) }
        for withCommandCode in [false, true] {
            let session = try tpm.policySession(clockBelow: deadline, commandCode: withCommandCode)
            #expect(throws: TestFailure.self, "a policy session, command code \(withCommandCode)") {
                try changeAuth(loaded, "session:\(session)+\(value)")
            }
        }
        try tpm.flushTransients()
        #expect(try verifier.check(right), "the verifier works as before")
        // Control: the verifiers' shape before this fix.
        let policy = try tpm.policyDigest(clockBelow: deadline)
        try tpm.flushTransients()
        try tpm.tool(
            "tpm2_create",
            [
                "-C", srk, "-G", "hmac", "-a", "fixedtpm|fixedparent|sensitivedataorigin|sign", "-L", policy, "-p",
                value, "-u", tpm.directory.file("old.pub"), "-r", tpm.directory.file("old.priv"),
            ])
        let old = try tpm.load(
            publicArea: try Data(contentsOf: URL(fileURLWithPath: tpm.directory.file("old.pub"))),
            privateArea: try Data(contentsOf: URL(fileURLWithPath: tpm.directory.file("old.priv"))), under: srk)
        #expect(throws: Never.self, "the old kind took a password session") { try changeAuth(old, value) }
    }

    /// H3: a power cut takes the TPM's Clock back to the value it last saved (on swtpm from a minute to about zero), so
    /// a thief who knows the PIN and cuts the power again and again would keep offline login past the grace. The
    /// verifier's policy wants a safe Clock, and the Clock is safe again only once it has passed that value. Control:
    /// a clean reboot (TPM2_Shutdown first) keeps the Clock safe and the verifier usable.
    @Test func afterAPowerCutTheVerifierWaitsForTheClockToBeSafe() throws {
        let verifier = try Verifier()
        let (tpm, store) = (verifier.tpm, verifier.store)
        try tpm.advanceClock(byMilliseconds: 60_000)
        try tpm.reboot()
        #expect(try tpm.clockIsSafe())
        #expect(try verifier.check(Self.right), "control: a clean reboot")
        let before = try tpm.clock()
        try tpm.cutPower()
        #expect(try tpm.clock() < before, "the Clock went back to the value it last saved")
        #expect(try !tpm.clockIsSafe())
        #expect(try !store.standing(policy: .organization).clockSafe)
        // The TPM counts the power cut itself as a failure (TPM2_Startup after no TPM2_Shutdown); the checks add none.
        let counted = try store.lockoutState().failures
        #expect(throws: TPMFailure.clockUnsafe) { _ = try verifier.check(Self.right) }
        #expect(throws: TPMFailure.clockUnsafe) { _ = try verifier.check(Self.wrong) }
        #expect(try store.lockoutState().failures == counted, "nothing reached the authorization check")
        // Running past the next save (every 2^22 ms), the TPM writes its Clock and trusts it again.
        try tpm.advanceClock(byMilliseconds: 1 << 22)
        #expect(try tpm.clockIsSafe())
        #expect(try verifier.check(Self.right))
    }

    /// The TPM2B_PUBLIC and TPM2B_PRIVATE of a key file (TPMDeviceKeyStore's format: magic, then three fields of a
    /// big-endian UInt16 length and the bytes: the SRK's name, the public area, the private area).
    static func parts(ofKeyFile path: String) throws -> (Data, Data) {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))[...].dropFirst("XIGNTPM1".count)
        var fields: [Data] = []
        while bytes.count >= 2 {
            let size = Int(bytes[bytes.startIndex]) << 8 | Int(bytes[bytes.startIndex + 1])
            fields.append(Data(bytes.dropFirst(2).prefix(size)))
            bytes = bytes.dropFirst(2 + size)
        }
        guard fields.count == 3 else { throw TestFailure("\(path) is no key file") }
        return (fields[1], fields[2])
    }

    @Test func aVerifierIsUselessInAnotherTPM() throws {
        let tpm = try Self.strictTPM(), other = try Self.strictTPM()
        let directory = TemporaryDirectory()
        let (reference, deadline) = try TPMPINVerifierStore(directory: directory.path, tcti: tpm.tcti).create(
            authorization: Data(repeating: 1, count: 32), beside: "key", graceMilliseconds: Self.week,
            policy: .organization)
        let elsewhere = TPMPINVerifierStore(directory: directory.path, tcti: other.tcti)
        #expect(throws: TPMFailure.cleared) {
            _ = try elsewhere.check(reference, authorization: Data(repeating: 1, count: 32), deadline: deadline)
        }
        // Nothing was tried there: no PIN can be tested against another TPM.
        #expect(try elsewhere.lockoutState().failures == 0)
    }

    @Test func aDeviceKeyBlobIsNotAcceptedAsAVerifier() throws {
        let tpm = try Self.strictTPM()
        let directory = TemporaryDirectory()
        // A noDA key in the verifier's place would accept any value without counting.
        let (_, key) = try TPMDeviceKeyStore(directory: directory.path, tcti: tpm.tcti).createPendingKey()
        try FileManager.default.copyItem(
            atPath: directory.file("\(key).tpm"), toPath: directory.file("swapped.pinverifier"))
        let store = TPMPINVerifierStore(directory: directory.path, tcti: tpm.tcti)
        #expect(throws: TPMFailure.self) {
            _ = try store.check("swapped", authorization: Data(repeating: 1, count: 32), deadline: .max)
        }
    }
}
