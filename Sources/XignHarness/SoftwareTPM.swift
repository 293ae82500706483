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
        try tool(
            "tpm2_dictionarylockout",
            [
                "--setup-parameters", "--max-tries=32", "--recovery-time=1", "--lockout-recovery-time=1",
                "--clear-lockout",
            ])
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
