import Foundation
import XignCore
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// A login from a host without root (a screen locker run by the user) goes through xignd: what the extra hop
/// costs, against the same user's login in-process under root, in the same run.
extension Bench {
    static func daemonFigures(
        bin: String, module: String, work: String, configuration: ClientConfiguration, pin: String,
        register: (String) throws -> PersonalizationInitializationData
    ) throws {
        let user = "nobody"
        let sdk = try XignSdk(configuration: configuration, localUser: user)
        try enrol(sdk, "nobody@example.org", pin: pin, register: register)

        // What nobody must reach: the harness, a copy of the module and the service files. Not the state.
        let shared = work + "/shared"
        try FileManager.default.createDirectory(
            atPath: shared + "/pam.d", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        chmod(work, 0o711)
        try FileManager.default.copyItem(atPath: module, toPath: shared + "/pam_xign.so")
        try FileManager.default.copyItem(atPath: work + "/pam_harness", toPath: shared + "/pam_harness")
        let socket = work + "/xignd.sock"
        let config = work + "/xignd.conf"
        try "state_dir = \(configuration.stateDirectory)\ndevice_key = software\n".write(
            toFile: config, atomically: true, encoding: .utf8)
        // The bench's locker runs in no seat session (no logind here), so it opts out of the check that a login is at the
        // machine (remote=pin-only); the login bench measures that check.
        let line = "auth required \(shared)/pam_xign.so config=\(config) socket=\(socket) remote=pin-only\n"
        try line.write(toFile: shared + "/pam.d/locker", atomically: true, encoding: .utf8)
        for file in ["pam.d/locker", "pam_xign.so", "pam_harness"] { chmod(shared + "/" + file, 0o755) }

        let daemon = Process()
        daemon.executableURL = URL(fileURLWithPath: bin + "/xignd")
        daemon.arguments = ["--config", config, "--socket", socket, "--no-directory"]
        daemon.standardError = FileHandle.nullDevice
        try daemon.run()
        defer { kill(daemon.processIdentifier, SIGKILL) }
        for _ in 0..<500 where !FileManager.default.fileExists(atPath: socket) { usleep(10_000) }

        let runs = 100
        let input = String(repeating: pin + "\n", count: runs)
        let inProcess = try run(
            shared + "/pam_harness", [shared + "/pam.d", "locker", user, String(runs)], input: input)
        let throughDaemon = try run(
            "/usr/bin/setpriv",
            [
                "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--",
                shared + "/pam_harness", shared + "/pam.d", "locker", user, String(runs),
            ], input: input)
        for output in [inProcess, throughDaemon] where !output.contains("result=0 ") {
            throw XignSdkError(.invalidManagerResponse, "the locker logins failed:\n\(output.suffix(400))")
        }
        func times(_ output: String) -> [Double] {
            output.split(separator: "\n").compactMap {
                $0.hasPrefix("time_us=") ? Double($0.dropFirst(8)).map { $0 / 1000 } : nil
            }.dropFirst().map {
                $0
            }
        }
        let root = Figure(name: "as root: in-process (floor)", milliseconds: times(inProcess))
        table(
            "A screen locker's login: the same user and module, \(runs) logins each (runs 2…\(runs))",
            [
                root,
                Figure(name: "as the user: through xignd (socket, relayed prompt)", milliseconds: times(throughDaemon)),
            ], floor: root)
    }
}
