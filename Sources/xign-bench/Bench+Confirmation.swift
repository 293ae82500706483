import Foundation
import XignCore
import XignCrypto
import XignHarness
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// Login confirmation: what a confirmation costs the manager, and how soon a waiting PAM login ends after the
/// approval (the module long-polls; the target is at most 300 ms median).
extension Bench {
    static func confirmationFigures(
        bin: String, module: String, work: String, managerURL: ManagerURL, sdk: XignSdk, email: String, pin: String,
        floor: Figure,
        managerPID: Int32, register: (String) throws -> PersonalizationInitializationData
    ) throws {
        let manager = bin + "/xign-manager"
        try run(manager, ["admin", "accounts", "set-login", email, "bench", "--data-dir", work + "/manager"])
        try run(manager, ["admin", "accounts", "set-host-groups", email, "--all", "--data-dir", work + "/manager"])
        // The bench's host names no local user: the account may be the hosts' own.
        try run(manager, ["admin", "accounts", "set-local-user", email, "yes", "--data-dir", work + "/manager"])
        let added = try run(manager, ["admin", "hosts", "add", "bench-host", "--data-dir", work + "/manager"])
        var configuration = ClientConfiguration()
        configuration.stateDirectory = work + "/host"
        let host = try XignSdk(configuration: configuration, localUser: "root")
        _ = try host.joinHost(
            managerURL: managerURL, token: try HostJoinToken(parsing: String(added.split(separator: " ").last ?? "")))
        guard let enrolment = try sdk.store.list().first(where: { $0.accountEmail == email }) else {
            throw XignSdkError(.stateUnavailable, "no enrolment of \(email) to approve with")
        }
        let approver = ManagerBench.Client(sdk: sdk, idmIdentifier: enrolment.idmIdentifier, user: "bench")
        func approve(_ confirmationId: String, _ code: String) throws {
            try approver.approve(confirmationId, code: code, pin: pin)
        }
        var starts: [Double] = [], approvals: [Double] = []
        for _ in 0..<30 {
            var started = DispatchTime.now().uptimeNanoseconds
            let pending = try host.startLoginConfirmation(
                loginName: "bench", service: "sshd", remoteHost: nil, tty: nil, command: nil)
            starts.append(Double(DispatchTime.now().uptimeNanoseconds - started) / 1_000_000)
            // At most three may wait per account: each is approved before the next starts.
            started = DispatchTime.now().uptimeNanoseconds
            try approve(pending.confirmationId, pending.code)
            approvals.append(Double(DispatchTime.now().uptimeNanoseconds - started) / 1_000_000)
        }
        let wakeUps = try approvalToSuccess(
            module: module, work: work, hostState: configuration.stateDirectory, approve: approve)
        table(
            "Login confirmation (host and approving device against the manager on loopback)",
            [
                floor,
                Figure(name: "host: start (host challenge + signed start)", milliseconds: starts),
                Figure(name: "device: approve (start, device + PIN, finish)", milliseconds: approvals),
                Figure(name: "approval → PAM_SUCCESS of a waiting pam_xign", milliseconds: wakeUps),
            ], floor: floor)

        // The same through a browser: a passkey device of another account that takes the login name in turn. The
        // software authenticator sends exactly what a browser sends; Chromium's own time is the user's, not ours.
        let phone = try PhoneBench(managerURL: managerURL, data: try register("phone@example.org"), pin: pin)
        let cpuTerminal = try managerCPU(managerPID, host: host, approvals: 30, approve: approve)
        try run(manager, ["admin", "accounts", "set-login", email, "bench-laptop", "--data-dir", work + "/manager"])
        try run(
            manager, ["admin", "accounts", "set-login", "phone@example.org", "bench", "--data-dir", work + "/manager"])
        try run(
            manager,
            ["admin", "accounts", "set-local-user", "phone@example.org", "yes", "--data-dir", work + "/manager"])
        try run(
            manager,
            ["admin", "accounts", "set-host-groups", "phone@example.org", "--all", "--data-dir", work + "/manager"])
        let cpuBrowser = try managerCPU(managerPID, host: host, approvals: 30, approve: phone.approve)
        var browserApprovals: [Double] = []
        for _ in 0..<30 {
            let pending = try host.startLoginConfirmation(
                loginName: "bench", service: "sshd", remoteHost: nil, tty: nil, command: nil)
            let started = DispatchTime.now().uptimeNanoseconds
            try phone.approve(pending.confirmationId, pending.code)
            browserApprovals.append(Double(DispatchTime.now().uptimeNanoseconds - started) / 1_000_000)
        }
        let browserWakeUps = try approvalToSuccess(
            module: module, work: work, hostState: configuration.stateDirectory, approve: phone.approve)
        let terminal = Figure(name: "xign-setup approve: approve (baseline)", milliseconds: approvals)
        table(
            "Approving in a browser (passkey, one request) beside xign-setup approve (two requests), same run",
            [
                terminal,
                Figure(name: "browser: approve (challenge + one passkey request)", milliseconds: browserApprovals),
            ], floor: terminal)
        let terminalWakeUp = Figure(name: "xign-setup approve: approval → PAM_SUCCESS", milliseconds: wakeUps)
        table(
            "A waiting pam_xign after the approval, same run",
            [terminalWakeUp, Figure(name: "browser: approval → PAM_SUCCESS", milliseconds: browserWakeUps)],
            floor: terminalWakeUp)
        print(
            String(
                format: "manager CPU per approval: xign-setup approve %.2f ms, browser %.2f ms (ratio %.2f)",
                cpuTerminal, cpuBrowser,
                cpuBrowser / cpuTerminal))
        try sshMemoryFigures(
            module: module, work: work, hostState: configuration.stateDirectory, manager: manager,
            managerData: work + "/manager", email: email,
            approve: approve)
    }

    /// The manager's CPU time (user + system, from /proc) per approval, over `approvals` that a host starts in batches
    /// of ten (the per-account cap) from as many addresses; only the approvals are inside the window.
    private static func managerCPU(
        _ pid: Int32, host: XignSdk, approvals: Int, approve: (String, String) throws -> Void
    ) throws -> Double {
        var spent = 0.0
        for batch in 0..<(approvals / 10) {
            let pending = try (0..<10).map { index in
                try host.startLoginConfirmation(
                    loginName: "bench", service: "sshd", remoteHost: "192.0.2.\(batch * 10 + index + 1)", tty: nil,
                    command: nil)
            }
            let before = ManagerBench.cpuSeconds(pid)
            for confirmation in pending { try approve(confirmation.confirmationId, confirmation.code) }
            spent += ManagerBench.cpuSeconds(pid) - before
        }
        return spent * 1000 / Double(approvals - approvals % 10)
    }

    /// Runs pam_authenticate in confirm mode for `user` in a harness process (`work`/pam_harness, built by the caller),
    /// approves once the code is shown, and measures from the approval's end to the harness's end.
    static func approvalToSuccess(
        module: String, work: String, hostState: String, user: String = "bench", runs: Int = 20,
        approve: (String, String) throws -> Void
    ) throws -> [Double] {
        try "state_dir = \(hostState)\n".write(toFile: work + "/host.conf", atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: work + "/pam.d", withIntermediateDirectories: true)
        try "auth required \(module) mode=confirm config=\(work)/host.conf timeout=30\n".write(
            toFile: work + "/pam.d/confirm", atomically: true, encoding: .utf8)
        var samples: [Double] = []
        for _ in 0..<runs {
            let process = Process(), output = Pipe()
            process.executableURL = URL(fileURLWithPath: work + "/pam_harness")
            process.arguments = [work + "/pam.d", "confirm", user]
            process.standardOutput = output
            process.standardInput = FileHandle.nullDevice
            try process.run()
            var text = ""
            var shown = confirmationShown(in: text)
            while shown == nil {
                let chunk = output.fileHandleForReading.availableData
                guard !chunk.isEmpty else {
                    throw XignSdkError(.invalidInput, "the confirming login ended early: \(text.suffix(300))")
                }
                text += String(decoding: chunk, as: UTF8.self)
                shown = confirmationShown(in: text)
            }
            try approve(shown!.id, shown!.code)
            let approved = DispatchTime.now().uptimeNanoseconds
            let rest = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            // Timed at the harness's last output: Foundation's waitUntilExit polls every 50 ms.
            samples.append(Double(DispatchTime.now().uptimeNanoseconds - approved) / 1_000_000)
            process.waitUntilExit()
            guard rest.contains("result=0 ") else {
                throw XignSdkError(.invalidInput, "the approved login failed: \(rest.suffix(300))")
            }
        }
        return samples
    }

    /// The confirmation id (from its link) and the code in what pam_xign shows, once both are there.
    static func confirmationShown(in text: String) -> (id: String, code: String)? {
        guard let link = text.range(of: #"c#[A-Z2-7]{26}"#, options: .regularExpression),
            let code = text.range(of: #"type the code \d{6}"#, options: .regularExpression)
        else { return nil }
        return (String(text[link].dropFirst(2)), String(text[code].suffix(6)))
    }
}
