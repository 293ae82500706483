import Foundation
import XignDevice

/// One swtpm per test, on a unix socket in a temporary directory (docs/design.md, "Testing with real parts").
public final class SoftwareTPM: @unchecked Sendable {
    public let directory = TemporaryDirectory()
    private var process: ChildProcess?
    /// A TPM a static holds: its simulator (also after a restart) is stopped and its state removed when the run ends.
    private var lastsTheRun = false

    /// The TCTI configuration that reaches this TPM.
    public var tcti: String { "swtpm:path=\(directory.file("s"))" }

    /// Quiet libtss2 in child processes.
    public static let environment = ["TSS2_LOG": TPMLog.setting]

    public init() throws { try start() }

    /// A TPM whose maker `ca` stored EK certificates in it: RSA 2048 and ECC P-384, or without `ecc` RSA only.
    public init(manufacturedBy ca: TPMMakerCA, ecc: Bool = true) throws {
        try ca.manufacture(into: directory.path)
        try start()
        // swtpm_setup 0.7 stores both; the platform may remove one.
        if !ecc { try tool("tpm2_nvundefine", ["-C", "p", "0x01c00016"]) }
    }

    /// Starts (or restarts, as after a reboot) the simulator on the same state.
    public func start() throws {
        try? FileManager.default.removeItem(atPath: directory.file("s"))
        process = try ChildProcess(
            "/usr/bin/swtpm",
            [
                "socket", "--tpm2", "--server", "type=unixio,path=\(directory.file("s"))", "--ctrl",
                "type=unixio,path=\(directory.file("s.ctrl"))",
                "--flags", "not-need-init,startup-clear", "--tpmstate", "dir=\(directory.path)",
            ], in: directory)
        if lastsTheRun, let process { RunEnd.stop(process.pid) }
        let deadline = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: directory.file("s")) {
            if let result = process?.poll() {
                throw TestFailure("swtpm exited with \(result.status): \(result.stderr)")
            }
            guard Date() < deadline else { throw TestFailure("swtpm did not start") }
            usleep(2_000)
        }
        // Keys are noDA, but keep the dictionary-attack parameters known and lenient. Only at the first start: a
        // restart finds them kept, and the lockout authorization perhaps taken.
        guard !started else { return }
        started = true
        // The socket appears at bind(), a moment before swtpm accepts on it: in a full make test on a busy machine the
        // first tool once found nothing to connect to ("Could not load tcti"), so the first call is tried again.
        let setUp = [
            "--setup-parameters", "--max-tries=32", "--recovery-time=1", "--lockout-recovery-time=1", "--clear-lockout",
        ]
        for attempt in 1... {
            do {
                _ = try tool("tpm2_dictionarylockout", setUp)
                return
            } catch let failure as TestFailure where failure.description.contains("Could not load tcti") && attempt < 20
            {
                usleep(100_000)
            }
        }
    }

    private var started = false

    /// For a static: this TPM serves the whole run, and goes when it ends.
    public func lastingTheRun() -> SoftwareTPM {
        lastsTheRun = true
        if let process { RunEnd.stop(process.pid) }
        RunEnd.remove(directory.path)
        return self
    }

    public func stop() {
        process?.stop()
        process = nil
    }

    /// The machine loses power: the simulator dies without TPM2_Shutdown and starts again on its saved state, whose
    /// Clock is the value it last wrote to NV (it saves about every 70 minutes), and not safe.
    public func cutPower() throws {
        process?.kill()
        process = nil
        try start()
    }

    /// A clean reboot: TPM2_Shutdown, as the kernel sends it, then a start on the same state.
    public func reboot() throws {
        try tool("tpm2_shutdown", [])
        stop()
        try start()
    }

    /// Whether the TPM's Clock is safe (TPMS_CLOCK_INFO.safe), as tpm2_readclock reads it.
    public func clockIsSafe() throws -> Bool {
        let output = try tool("tpm2_readclock", [])
        guard let line = output.split(separator: "\n").first(where: { $0.contains("safe:") }) else {
            throw TestFailure("tpm2_readclock printed no safe flag: \(output)")
        }
        return line.contains("yes") || line.hasSuffix(" 1")
    }

    /// tpm2_clear with the platform hierarchy, as the firmware's "clear TPM" does: a new storage seed (keys made
    /// before can no longer load) and an empty lockout authorization.
    public func clear() throws { try tool("tpm2_clear", ["-c", "p"]) }

    @discardableResult
    public func tool(_ name: String, _ arguments: [String]) throws -> String {
        var environment = ProcessInfo.processInfo.environment.merging(Self.environment) { _, new in new }
        environment["TPM2TOOLS_TCTI"] = tcti
        let result = try ChildProcess("/usr/bin/\(name)", arguments, environment: environment, in: directory).wait(
            timeout: 30)
        guard result.status == 0 else { throw TestFailure("\(name) failed (\(result.status)): \(result.stderr)") }
        return result.stdout
    }

    /// xign's storage root key (the TCG template: ECC P-256, AES-128-CFB, a unique field of zeros) as tpm2-tools makes
    /// it, so that tpm2-tools can load xign's objects; the path of its context.
    public func storageRootKey() throws -> String {
        // tpm2-tools reads the unique field as the TPMU_PUBLIC_ID in memory: for each coordinate a little-endian
        // size and a buffer of TPM2_MAX_ECC_KEY_BYTES (128).
        let coordinate = Data([32, 0]) + Data(count: 128)
        let unique = directory.file("srk-unique")
        try writeTestFile(unique, coordinate + coordinate)
        try flushTransients()
        try tool(
            "tpm2_createprimary",
            [
                "-C", "o", "-g", "sha256", "-G", "ecc256:null:aes128cfb", "-a",
                "fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda|restricted|decrypt", "-u", unique, "-c",
                directory.file("srk.ctx"),
            ])
        return directory.file("srk.ctx")
    }

    /// Loads an object's public and private areas under `parent` (a context); the path of its context.
    public func load(publicArea: Data, privateArea: Data, under parent: String) throws -> String {
        let name = "object-\(UUID().uuidString.prefix(8))"
        try writeTestFile(directory.file(name + ".pub"), publicArea)
        try writeTestFile(directory.file(name + ".priv"), privateArea)
        try flushTransients()
        try tool(
            "tpm2_load",
            [
                "-C", parent, "-u", directory.file(name + ".pub"), "-r", directory.file(name + ".priv"), "-c",
                directory.file(name + ".ctx"),
            ])
        return directory.file(name + ".ctx")
    }

    /// The offline verifier's policy as tpm2-tools builds it: the Clock below `deadline` and safe, then the
    /// authorization value, and with `commandCode` TPM2_PolicyCommandCode(ObjectChangeAuth) as well. A policy session's
    /// context.
    public func policySession(clockBelow deadline: UInt64, commandCode: Bool = false) throws -> String {
        try policy(clockBelow: deadline, commandCode: commandCode, trial: false)
    }

    /// The digest of that policy, from a trial session; the path of the file that holds it.
    public func policyDigest(clockBelow deadline: UInt64) throws -> String {
        try policy(clockBelow: deadline, commandCode: false, trial: true)
    }

    private func policy(clockBelow deadline: UInt64, commandCode: Bool, trial: Bool) throws -> String {
        let session = directory.file("session.ctx"), digest = directory.file("policy.digest")
        _ = try? tool("tpm2_flushcontext", ["--saved-session"])
        try tool("tpm2_startauthsession", (trial ? [] : ["--policy-session"]) + ["-S", session])
        try tool("tpm2_policycountertimer", ["-S", session, "--ult", "clock=\(deadline)"])
        try tool("tpm2_policycountertimer", ["-S", session, "safe"])
        try tool("tpm2_policyauthvalue", ["-S", session] + (trial && !commandCode ? ["-L", digest] : []))
        if commandCode { try tool("tpm2_policycommandcode", ["-S", session, "TPM2_CC_ObjectChangeAuth"]) }
        if trial { try tool("tpm2_flushcontext", [session]) }
        return trial ? digest : session
    }

    /// Flushes the transient objects tpm2-tools left loaded: swtpm has no resource manager, and room for three.
    public func flushTransients() throws { try tool("tpm2_flushcontext", ["--transient-object"]) }

    /// Dictionary-attack parameters under which a failure stays counted for the length of a test.
    public func countFailuresStrictly(maxTries: Int = 32) throws {
        try tool(
            "tpm2_dictionarylockout",
            ["--setup-parameters", "--max-tries=\(maxTries)", "--recovery-time=3600", "--lockout-recovery-time=3600"])
    }

    /// The TPM's Clock in milliseconds, as tpm2_readclock reads it.
    public func clock() throws -> UInt64 {
        let output = try tool("tpm2_readclock", [])
        guard let range = output.range(of: "clock_info:\n  clock: "),
            let line = output[range.upperBound...].split(separator: "\n").first,
            let value = UInt64(line)
        else { throw TestFailure("tpm2_readclock printed no clock: \(output)") }
        return value
    }

    /// Moves the TPM's Clock forward (TPM2_ClockSet with the owner's empty authorization, as root may); it never goes back.
    public func advanceClock(byMilliseconds milliseconds: UInt64) throws {
        try tool("tpm2_setclock", [String(try clock() + milliseconds)])
    }

    /// TPM2_PT_LOCKOUT_COUNTER as tpm2_getcap reads it: the failures the TPM's dictionary-attack protection holds.
    public func lockoutCounter() throws -> Int {
        let output = try tool("tpm2_getcap", ["properties-variable"])
        guard let range = output.range(of: "TPM2_PT_LOCKOUT_COUNTER:"),
            let line = output[range.upperBound...].split(separator: "\n").first,
            let value = Int(
                line.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "0x", with: ""), radix: 16)
        else { throw TestFailure("tpm2_getcap printed no lockout counter: \(output)") }
        return value
    }

    deinit { stop() }
}
