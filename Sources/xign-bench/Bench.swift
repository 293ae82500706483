import Foundation
import XignCore
import XignCrypto
import XignDevice
import XignLogin
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// `make bench`: the client's operations against a real manager on loopback, each as a median and p95,
/// with GET /health measured in the same run as the floor every ratio is taken against.
@main
struct Bench {
    struct Figure {
        let name: String
        let milliseconds: [Double]
        var median: Double { percentile(0.5) }
        func percentile(_ p: Double) -> Double {
            let sorted = milliseconds.sorted()
            return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))]
        }
    }

    static func measure(_ name: String, runs: Int, _ body: (Int) throws -> Void) rethrows -> Figure {
        var samples: [Double] = []
        for run in 0..<runs {
            let start = DispatchTime.now().uptimeNanoseconds
            try body(run)
            samples.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1_000_000)
        }
        return Figure(name: name, milliseconds: samples)
    }

    static func main() throws {
        TPMLog.quiet()
        // `xign-bench scale [ACCOUNTS]`: make bench-scale.
        if CommandLine.arguments.dropFirst().first == "scale" {
            return try ScaleBench.run(
                accounts: CommandLine.arguments.dropFirst(2).first.flatMap { Int($0) } ?? 1_000_000)
        }
        if CommandLine.arguments.dropFirst().first == "manager" {
            var arguments = Array(CommandLine.arguments.dropFirst(2))
            var pam: ManagerBench.PAMModule?
            if let flag = arguments.firstIndex(of: "--pam") {
                guard arguments.count >= flag + 3 else {
                    throw XignSdkError(.invalidInput, "--pam needs the module and the harness source")
                }
                pam = ManagerBench.PAMModule(module: arguments[flag + 1], harnessSource: arguments[flag + 2])
                arguments.removeSubrange(flag...(flag + 2))
            }
            let seconds = arguments.first.flatMap(Double.init) ?? 10
            let only = Set(arguments.dropFirst())
            return try ManagerBench.run(
                seconds: seconds,
                only: only.isEmpty ? ["logins", "sqlite", "postgresql", "privacyidea", "waiting"] : only, pam: pam)
        }
        let bin = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().path
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("xign-bench-\(getpid())").path
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }
        // `xign-bench distance`: the network distance and reach figures alone.
        if CommandLine.arguments.dropFirst().first == "distance" { return try distanceFigures() }
        if CommandLine.arguments.dropFirst().first == "phone" { return try phonePageFigures() }
        // `xign-bench directory NSS_MODULE LOOKUP_SOURCE`: the NSS figures alone.
        if CommandLine.arguments.count == 4, CommandLine.arguments[1] == "directory" {
            return try directoryFigures(
                module: CommandLine.arguments[2], lookupSource: CommandLine.arguments[3], work: work)
        }

        let manager = Process()
        manager.executableURL = URL(fileURLWithPath: bin + "/xign-manager")
        // Defaults, but rate limits the bench's own registrations from one address would reach.
        let makerCA = try attestationCA()
        try (ManagerBench.config + (makerCA.map { "\n[attestation]\nca_directory = \($0.trustedDirectory)\n" } ?? ""))
            .write(
                toFile: work + "/manager.conf", atomically: true, encoding: .utf8)
        manager.arguments = [
            "serve", "--config", work + "/manager.conf", "--data-dir", work + "/manager", "--listen", "127.0.0.1:0",
            "--port-file", work + "/port",
        ]
        manager.standardOutput = FileHandle.nullDevice
        manager.standardError = FileHandle.nullDevice
        try manager.run()
        defer { kill(manager.processIdentifier, SIGKILL) }
        var port = 0
        for _ in 0..<300 where port == 0 {
            port =
                Int(
                    (try? String(contentsOfFile: work + "/port", encoding: .utf8))?.trimmingCharacters(
                        in: .whitespacesAndNewlines) ?? "") ?? 0
            usleep(20_000)
        }
        guard port != 0 else { throw XignSdkError(.managerUnreachable, "xign-manager did not start") }
        let url = try ManagerURL("http://127.0.0.1:\(port)")
        var configuration = ClientConfiguration()
        configuration.stateDirectory = work + "/state"
        configuration.deviceKey = .software
        let sdk = try XignSdk(configuration: configuration, localUser: "bench")
        let http = HTTPClient()
        let pin = "24680"

        func register(_ email: String) throws -> PersonalizationInitializationData {
            let parameters = try sdk.registry.initializationSynchronous(url: url)
            parameters.pinSpec.setPin(pin)
            parameters.selection?.info.email?.setValue(value: email)
            _ = try sdk.registry.registerSynchronous(data: parameters)
            let outbox = work + "/manager/outbox/new"
            for file in try FileManager.default.contentsOfDirectory(atPath: outbox).sorted().reversed() {
                let mail = try String(contentsOfFile: outbox + "/" + file, encoding: .utf8)
                if mail.contains("To: \(email)\r\n") { return try PersonalizationInitializationData(parsingMail: mail) }
            }
            throw XignSdkError(.invalidInput, "no mail for \(email)")
        }

        print(
            "xign bench: manager on \(url), default PIN hashing (10000 PBKDF2 iterations), \(ProcessInfo.processInfo.activeProcessorCount) cores"
        )
        _ = try measure("warm-up", runs: 20) { _ in _ = try http.send("GET", to: url, path: APIPath.health) }
        let floor = try measure("GET /health (floor)", runs: 300) { _ in
            _ = try http.send("GET", to: url, path: APIPath.health)
        }
        let parameters = try measure("registration parameters", runs: 200) { _ in
            _ = try sdk.registry.initializationSynchronous(url: url)
        }
        var activations: [PersonalizationInitializationData] = []
        let registration = try measure("register (validate, hash PIN, mail)", runs: 40) { run in
            activations.append(try register("bench\(run)@example.org"))
        }
        let decrypt = try measure("decrypt with the right PIN", runs: 40) { run in
            _ = try sdk.personalizer().decryptPersonalizationInitializationDataSynchronous(
                data: activations[run], pin: pin)
        }
        let fresh = try (0..<30).map { try register("whole\($0)@example.org") }
        let personalization = try measure("whole personalization (decrypt + key + personalize)", runs: 30) { run in
            guard
                case .newPersonalization(let parameters) = try sdk.personalizer()
                    .decryptPersonalizationInitializationDataSynchronous(
                        data: fresh[run], pin: pin)
            else {
                throw XignSdkError(.invalidManagerResponse, "expected newPersonalization")
            }
            _ = try sdk.personalizer().personalizeIdentityManagerSynchronous(parameters: parameters)
        }

        table(
            "Registration and personalization (client ↔ manager on loopback)",
            [floor, parameters, registration, decrypt, personalization],
            floor: floor)

        // Authentication as pam_xign runs it, step by step in this process, to break a login down.
        guard let enrolment = try sdk.store.list().first else {
            throw XignSdkError(.stateUnavailable, "no enrolment to log in with")
        }
        var starts: [Double] = [], finishes: [Double] = [], tokens: [Double] = []
        for _ in 0..<50 {
            var t = DispatchTime.now().uptimeNanoseconds
            var login = LocalLogin(
                sdk: sdk, enrolment: enrolment, service: "pam", role: "login", conversation: BenchConversation(pin: pin)
            )
            login.afterRoundTrip = { step in
                let now = DispatchTime.now().uptimeNanoseconds
                defer { t = now }
                let milliseconds = Double(now - t) / 1_000_000
                switch step {
                case .start: starts.append(milliseconds)
                case .finish: finishes.append(milliseconds)
                case .token: tokens.append(milliseconds)
                }
            }
            guard try login.run() == .signedIn else { break }
        }
        let key = try P256PrivateKey()
        let message = Data(repeating: 7, count: 200)
        let signing = try measure("client: ECDSA P-256 sign (software key)", runs: 200) { _ in
            _ = try key.signature(for: message)
        }
        let jws = try JWS.sign(
            payload: message, header: JWS.Header(typ: "t", kid: key.publicKey.fingerprint), with: key)
        let publicKey = key.publicKey
        let verifying = try measure("client: JWS ES256 verify", runs: 200) { _ in
            _ = try JWS.verify(jws, expectedType: "t", key: publicKey)
        }
        let hashing = try measure("manager: PIN verifier (PBKDF2 10000 + HMAC)", runs: 50) { _ in
            _ = try PBKDF2.deriveKey(password: Data(pin.utf8), salt: Data(count: 16), iterations: 10_000)
        }
        var steps = [
            Figure(name: "round trips 1 and 2: challenge and start", milliseconds: starts),
            Figure(
                name: "round trip 3: finish (device signature, PIN check, the token with the answer)",
                milliseconds: finishes),
            Figure(
                name: "the token's checks (a round trip only to a manager that predates tokens in the finish)",
                milliseconds: tokens),
            signing, verifying, hashing,
        ]
        if let tpmSigning = try tpmSignLatency(work: work) { steps.insert(tpmSigning, at: 4) }
        table("One login, step by step", steps, floor: floor)

        try offlineFigures(work: work, pin: pin, floor: floor) {
            try enrol($0, "laptop@example.org", pin: pin, register: register)
        }
        if let makerCA { try attestationFigures(ca: makerCA, work: work, pin: pin, floor: floor, register: register) }

        // Three more local users with an enrolment each, for parallel logins on different activations.
        for user in ["bench1", "bench2", "bench3"] {
            try enrol(
                try XignSdk(configuration: configuration, localUser: user), "\(user)@example.org", pin: pin,
                register: register)
        }

        // The module inside a host process, through real libpam, against pam_permit.so as the floor.
        if CommandLine.arguments.count >= 3 {
            try pamFigures(
                module: CommandLine.arguments[1], harnessSource: CommandLine.arguments[2], work: work,
                state: work + "/state", managerPort: port,
                pin: pin)
            try confirmationFigures(
                bin: bin, module: CommandLine.arguments[1], work: work, managerURL: url, sdk: sdk,
                email: "whole0@example.org", pin: pin,
                floor: floor,
                managerPID: manager.processIdentifier, register: register)
            try daemonFigures(
                bin: bin, module: CommandLine.arguments[1], work: work, configuration: configuration, pin: pin,
                register: register)
        } else {
            print("\n(PAM figures need: xign-bench PAM_MODULE HARNESS_SOURCE; `make bench` passes them)")
        }
        if CommandLine.arguments.count >= 5 {
            try directoryFigures(
                module: CommandLine.arguments[3], lookupSource: CommandLine.arguments[4], work: work)
        } else {
            print(
                "\n(NSS figures need: xign-bench PAM_MODULE HARNESS_SOURCE NSS_MODULE LOOKUP_SOURCE; `make bench` passes them)"
            )
        }
        try distanceFigures()
        try phonePageFigures()
    }

    /// ECDSA in swtpm (a software TPM: a real chip is slower, typically tens of ms). Nil without swtpm.
    static func tpmSignLatency(work: String) throws -> Figure? {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/swtpm") else {
            print("(no swtpm: TPM signing not measured)")
            return nil
        }
        let directory = work + "/tpm"
        let swtpm = try startSoftwareTPM(in: directory)
        defer { kill(swtpm.processIdentifier, SIGKILL) }
        let store = TPMDeviceKeyStore(directory: directory + "/keys", tcti: "swtpm:path=\(directory)/s")
        let key = try store.createPendingKey().key
        let message = Data(repeating: 7, count: 200)
        return try measure("client: ECDSA P-256 sign in the TPM (swtpm)", runs: 50) { _ in
            _ = try key.signature(for: message)
        }
    }

    /// Registers `email` and personalizes `sdk`'s machine for it.
    static func enrol(
        _ sdk: XignSdk, _ email: String, pin: String, register: (String) throws -> PersonalizationInitializationData
    ) throws {
        guard
            case .newPersonalization(let parameters) = try sdk.personalizer()
                .decryptPersonalizationInitializationDataSynchronous(
                    data: try register(email), pin: pin)
        else {
            throw XignSdkError(.invalidManagerResponse, "expected newPersonalization")
        }
        _ = try sdk.personalizer().personalizeIdentityManagerSynchronous(parameters: parameters)
    }

    /// swtpm on a socket in `directory`; the caller kills it.
    static func startSoftwareTPM(in directory: String) throws -> Process {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // Not through run(): it reads output to the end, and a daemon would hold the pipe open.
        let swtpm = Process()
        swtpm.executableURL = URL(fileURLWithPath: "/usr/bin/swtpm")
        swtpm.arguments = [
            "socket", "--tpm2", "--server", "type=unixio,path=\(directory)/s", "--ctrl",
            "type=unixio,path=\(directory)/s.ctrl",
            "--flags", "not-need-init,startup-clear", "--tpmstate", "dir=\(directory)",
        ]
        swtpm.standardOutput = FileHandle.nullDevice
        swtpm.standardError = FileHandle.nullDevice
        try swtpm.run()
        for _ in 0..<500 where !FileManager.default.fileExists(atPath: directory + "/s") { usleep(10_000) }
        return swtpm
    }

    /// A whole login with a TPM key, online and then with the manager unreachable (the same enrolment, its address
    /// pointed at a closed port): the offline login's cost beside the online one, in one run.
    static func offlineFigures(work: String, pin: String, floor: Figure, personalize: (XignSdk) throws -> Void) throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/swtpm") else {
            return print("(no swtpm: offline login not measured)")
        }
        let swtpm = try startSoftwareTPM(in: work + "/offline-tpm")
        defer { kill(swtpm.processIdentifier, SIGKILL) }
        var configuration = ClientConfiguration()
        configuration.stateDirectory = work + "/offline-state"
        configuration.deviceKey = .tpm
        configuration.tcti = "swtpm:path=\(work)/offline-tpm/s"
        // Offline login needs a lockout authorization nobody on the machine holds: xign takes it (docs/security.md).
        configuration.tpmLockout = .take
        let sdk = try XignSdk(configuration: configuration, localUser: "laptop")
        try personalize(sdk)
        guard let enrolment = try sdk.store.list().first else {
            throw XignSdkError(.stateUnavailable, "no TPM enrolment")
        }
        func login(_ expected: LoginOutcome) throws {
            let outcome = try LocalLogin(
                sdk: sdk, enrolment: try sdk.store.list()[0], service: "pam", role: "login",
                conversation: BenchConversation(pin: pin)
            )
            .run()
            guard outcome == expected else {
                throw XignSdkError(.invalidManagerResponse, "expected \(expected), got \(outcome)")
            }
        }
        let online = try measure("whole login, TPM key, manager reachable", runs: 30) { _ in try login(.signedIn) }
        let path = configuration.stateDirectory + "/identity-managers.json"
        let stored = try String(contentsOfFile: path, encoding: .utf8)
        try stored.replacingOccurrences(of: enrolment.managerURL.description, with: "http://127.0.0.1:1").write(
            toFile: path, atomically: true, encoding: .utf8)
        let offline = try measure("whole login, TPM key, offline (the TPM checks the PIN)", runs: 30) { _ in
            try login(.signedInOffline)
        }
        table("Offline login beside the online one (swtpm; a real TPM is slower)", [online, offline], floor: floor)
        print(String(format: "offline / online: %.2f×", offline.median / online.median))
    }

    static func table(_ title: String, _ figures: [Figure], floor: Figure) {
        print("\n\(title)")
        print("operation".padding(toLength: 54, withPad: " ", startingAt: 0) + "runs   median ms   p95 ms   × floor")
        for figure in figures {
            print(
                figure.name.padding(toLength: 54, withPad: " ", startingAt: 0)
                    + String(
                        format: "%4d   %9.3f   %6.3f   %7.1f", figure.milliseconds.count, figure.median,
                        figure.percentile(0.95),
                        figure.median / floor.median))
        }
    }

    /// Runs the libpam harness for pam_xign.so and pam_permit.so, 200 logins each, and counts round trips through a proxy.
    static func pamFigures(
        module: String, harnessSource: String, work: String, state: String, managerPort: Int, pin: String
    ) throws {
        let harness = work + "/pam_harness"
        try run("/usr/bin/cc", ["-O2", "-o", harness, harnessSource, "-lpam"])
        let proxy = try CountingProxy(to: managerPort)
        // The enrolment talks to the manager through the proxy, which counts connections (libcurl opens one per request).
        let storePath = state + "/identity-managers.json"
        let stored = try String(contentsOfFile: storePath, encoding: .utf8)
        try stored.replacingOccurrences(of: "127.0.0.1:\(managerPort)", with: "127.0.0.1:\(proxy.port)").write(
            toFile: storePath, atomically: true, encoding: .utf8)
        // The proxy goes with this function; the enrolments talk to the manager directly again afterwards.
        defer { try? stored.write(toFile: storePath, atomically: true, encoding: .utf8) }
        try "state_dir = \(state)\n".write(toFile: work + "/xign.conf", atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: work + "/pam.d", withIntermediateDirectories: true)
        // The service and terminal of a console login (login on tty1), so the figures include deciding that it is at
        // the machine.
        try "auth required \(module) config=\(work)/xign.conf\n".write(
            toFile: work + "/pam.d/login", atomically: true, encoding: .utf8)
        try "auth required pam_permit.so\n".write(toFile: work + "/pam.d/permit", atomically: true, encoding: .utf8)
        let runs = 200
        let xign = try run(
            harness, [work + "/pam.d", "login", "bench", String(runs), "tty=tty1"],
            input: String(repeating: pin + "\n", count: runs))
        let roundTrips = Double(proxy.requests) / Double(runs)
        let connectionsPerLogin = Double(proxy.connections) / Double(runs)
        let permit = try run(harness, [work + "/pam.d", "permit", "bench", String(runs)], input: "")
        func times(_ output: String) -> [Double] {
            output.split(separator: "\n").compactMap {
                $0.hasPrefix("time_us=") ? Double($0.dropFirst(8)).map { $0 / 1000 } : nil
            }
        }
        func field(_ output: String, _ name: String) -> Int {
            output.split(whereSeparator: { $0 == "\n" || $0 == " " }).first { $0.hasPrefix(name + "=") }.flatMap {
                Int($0.dropFirst(name.count + 1))
            }
                ?? -1
        }
        guard xign.contains("result=0 ") else {
            throw XignSdkError(.invalidManagerResponse, "the benchmark logins failed:\n\(xign.suffix(400))")
        }
        let xignTimes = times(xign), permitTimes = times(permit)
        let permitFigure = Figure(name: "pam_authenticate with pam_permit.so (floor)", milliseconds: permitTimes)
        let steady = Figure(
            name: "pam_authenticate with pam_xign.so, runs 2…\(runs)", milliseconds: Array(xignTimes.dropFirst()))
        // What sudo, su and each sshd connection pay: the first pam_authenticate of a fresh process, and the dlopen in it.
        let fresh = 15
        var firstXign: [Double] = [], firstPermit: [Double] = []
        for _ in 0..<fresh {
            firstXign += times(
                try run(harness, [work + "/pam.d", "login", "bench", "2", "tty=tty1"], input: pin + "\n" + pin + "\n")
            ).prefix(1)
            firstPermit += times(try run(harness, [work + "/pam.d", "permit", "bench", "2"], input: "")).prefix(1)
        }
        let loader = work + "/dlopen_time"
        try Self.dlopenTimer.write(toFile: loader + ".c", atomically: true, encoding: .utf8)
        try run("/usr/bin/cc", ["-O2", "-o", loader, loader + ".c", "-ldl"])
        let libraries = try libraryDirectory()
        let permitPath = libraries + "/security/pam_permit.so"
        // The last path is timed; the ones before it are loaded first, untimed.
        let opens = { (paths: [String]) in
            try (0..<fresh).map { _ in
                (Double(try run(loader, paths).trimmingCharacters(in: .whitespacesAndNewlines)) ?? .nan) / 1000
            }
        }
        let curlLibraries = try run("/usr/bin/ldd", [libraries + "/libcurl.so.4"]).split(separator: "\n").filter {
            $0.contains("=>")
        }
        .count
        let permitOpen = Figure(name: "dlopen pam_permit.so in a fresh process", milliseconds: try opens([permitPath]))
        let permitFirst = Figure(
            name: "first pam_authenticate, pam_permit.so, fresh process", milliseconds: firstPermit)
        table(
            "PAM: \(runs) logins in one host process (pam_start_confdir + pam_authenticate + pam_end, PIN supplied)",
            [permitFigure, steady], floor: permitFigure)
        let first = Figure(name: "first pam_authenticate, pam_xign.so, fresh process", milliseconds: firstXign)
        table(
            "PAM in a fresh process, as sudo, su and each sshd connection run it (\(fresh) processes each)",
            [permitFirst, first], floor: permitFirst)
        // Where the module's load goes, step by step: what the system's libraries cost, and what is the module's own.
        let load = Figure(name: "dlopen pam_xign.so in a fresh process", milliseconds: try opens([module]))
        table(
            "Loading the module (dlopen RTLD_NOW, as libpam does, in a fresh process), and its parts",
            [
                permitOpen, load,
                Figure(name: "  part: libssl with libcrypto", milliseconds: try opens(["libssl.so.3"])),
                Figure(
                    name: "  part: libcurl and the \(curlLibraries) it links, after libssl",
                    milliseconds: try opens(["libssl.so.3", "libcurl.so.4"])),
                Figure(
                    name: "  part: pam_xign.so itself, after its libraries",
                    milliseconds: try opens([
                        "libssl.so.3", "libcurl.so.4", "libqrencode.so.4", "libstdc++.so.6", "libpam.so.0", module,
                    ])),
            ], floor: permitOpen)
        print(
            String(
                format:
                    "the first login in a process, step by step: dlopen %.2f ms + one-time set-up %.2f ms + a warm login %.2f ms = %.2f ms",
                load.median, first.median - load.median - steady.median, steady.median, first.median))
        print(
            String(
                format: "HTTP round trips per login: %.2f over %.2f connection(s) (counted at a proxy over %d logins)",
                roundTrips,
                connectionsPerLogin, runs))
        print("threads in the host before/after: \(field(xign, "threads_before")) / \(field(xign, "threads_after"))")
        let xignRSS = field(xign, "rss_after_kb") - field(xign, "rss_before_kb")
        let permitRSS = field(permit, "rss_after_kb") - field(permit, "rss_before_kb")
        print(
            "RSS the module adds to the host: \(xignRSS - permitRSS) KiB (pam_xign \(xignRSS) KiB, pam_permit \(permitRSS) KiB over the same runs)"
        )

        // Whole logins per second: one client after another, then 4 at once on one enrolment (their PIN checks
        // queue) and on four (they do not), each client a host process of its own.
        let each = 40
        func throughput(_ users: [String]) throws -> Double {
            let start = DispatchTime.now().uptimeNanoseconds
            let processes = try users.map { user -> (Process, Pipe) in
                let process = Process(), output = Pipe(), input = Pipe()
                process.executableURL = URL(fileURLWithPath: harness)
                process.arguments = [work + "/pam.d", "login", user, String(each), "tty=tty1"]
                process.standardOutput = output
                process.standardInput = input
                try process.run()
                input.fileHandleForWriting.write(Data(String(repeating: pin + "\n", count: each).utf8))
                try input.fileHandleForWriting.close()
                return (process, output)
            }
            for (process, output) in processes {
                let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                process.waitUntilExit()
                guard text.contains("result=0 ") else {
                    throw XignSdkError(.invalidManagerResponse, "parallel logins failed:\n\(text.suffix(400))")
                }
            }
            return Double(users.count * each) / (Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
        }
        let serial = try throughput(["bench"])
        let oneEnrolment = try throughput(Array(repeating: "bench", count: 4))
        let fourEnrolments = try throughput(["bench", "bench1", "bench2", "bench3"])
        print("\nWhole PAM logins per second (\(each) per client, each client a harness process)")
        print(String(format: "1 client:                      %6.1f /s (1.00×)", serial))
        print(
            String(
                format: "4 clients, one enrolment:      %6.1f /s (%.2f× of 1 client; its PIN checks queue)",
                oneEnrolment, oneEnrolment / serial))
        print(
            String(
                format: "4 clients, four enrolments:    %6.1f /s (%.2f× of 1 client)", fourEnrolments,
                fourEnrolments / serial))
    }

    /// Where Debian puts this architecture's libraries and PAM modules (/usr/lib/x86_64-linux-gnu).
    static func libraryDirectory() throws -> String {
        "/usr/lib/" + (try run("/usr/bin/gcc", ["-print-multiarch"])).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @discardableResult
    static func run(_ executable: String, _ arguments: [String], input: String? = nil) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe(), stdin = Pipe()
        process.standardOutput = output
        process.standardInput = stdin
        try process.run()
        stdin.fileHandleForWriting.write(Data((input ?? "").utf8))
        try stdin.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw XignSdkError(.invalidInput, "\(executable) failed with \(process.terminationStatus)")
        }
        return String(decoding: data, as: UTF8.self)
    }
}

extension Bench {
    /// Times one dlopen of the last argument with RTLD_NOW (libpam's flags), in microseconds, after loading the
    /// arguments before it untimed.
    static let dlopenTimer = """
        #include <dlfcn.h>
        #include <stdio.h>
        #include <time.h>
        int main(int argc, char **argv) {
            struct timespec a, b;
            if (argc < 2) return 2;
            for (int i = 1; i < argc - 1; i++) {
                if (dlopen(argv[i], RTLD_NOW) == NULL) { fprintf(stderr, "%s\\n", dlerror()); return 1; }
            }
            clock_gettime(CLOCK_MONOTONIC, &a);
            void *handle = dlopen(argv[argc - 1], RTLD_NOW);
            clock_gettime(CLOCK_MONOTONIC, &b);
            if (handle == NULL) { fprintf(stderr, "%s\\n", dlerror()); return 1; }
            printf("%ld\\n", (b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000);
            return 0;
        }
        """
}

/// A TCP forwarder on loopback that counts the connections it relays and the HTTP requests sent through them.
final class CountingProxy: @unchecked Sendable {
    let port: Int
    private let target: Int
    private let listener: Int32
    private let lock = NSLock()
    private var count = 0
    private var requestCount = 0

    var connections: Int { lock.withLock { count } }
    var requests: Int { lock.withLock { requestCount } }

    init(to target: Int) throws {
        self.target = target
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = Self.loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound, listen(fd, 64) == 0 else { throw XignSdkError(.invalidInput, "the proxy cannot listen") }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread { self.accepting() }
    }

    static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return address
    }

    private func accepting() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 { return }
            lock.withLock { count += 1 }
            let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = Self.loopback(port: target)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                }
            }
            guard connected else {
                close(client)
                close(upstream)
                continue
            }
            // As the manager's own sockets: a relay with Nagle on holds a response's second write for the client's
            // delayed ACK (40 ms) on a connection the login keeps open.
            var on: Int32 = 1
            for socket in [client, upstream] {
                setsockopt(socket, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
            }
            let pair = Pair(client, upstream)
            Thread.detachNewThread {
                // A request line ends in " HTTP/1.1"; the JSON bodies never hold one.
                let requests = Self.pump(from: client, to: upstream, counting: Array(" HTTP/1.1\r\n".utf8))
                self.lock.withLock { self.requestCount += requests }
                pair.finishOne()
            }
            Thread.detachNewThread {
                _ = Self.pump(from: upstream, to: client, counting: [])
                pair.finishOne()
            }
        }
    }

    /// Both sockets of a relayed connection, closed when both directions are done.
    private final class Pair: @unchecked Sendable {
        let a: Int32, b: Int32
        private let lock = NSLock()
        private var open = 2

        init(_ a: Int32, _ b: Int32) {
            self.a = a
            self.b = b
        }

        func finishOne() {
            let last = lock.withLock {
                open -= 1
                return open == 0
            }
            if last {
                close(a)
                close(b)
            }
        }
    }

    /// Relays until either side closes; returns how often `marker` passed (it may span reads).
    private static func pump(from source: Int32, to destination: Int32, counting marker: [UInt8]) -> Int {
        var buffer = [UInt8](repeating: 0, count: 16384)
        var seen = 0
        var tail: [UInt8] = []
        while true {
            let n = recv(source, &buffer, buffer.count, 0)
            if n <= 0 { break }
            if send(destination, buffer, n, Int32(MSG_NOSIGNAL)) < 0 { break }
            guard !marker.isEmpty else { continue }
            let window = tail + buffer[0..<n]
            seen += window.offsets(of: marker).count
            tail = Array(window.suffix(marker.count - 1))
        }
        shutdown(destination, Int32(SHUT_WR))
        shutdown(source, Int32(SHUT_RD))
        return seen
    }
}

/// Answers the PIN prompt, as the user would; the bench has no other questions to answer.
struct BenchConversation: Conversation {
    let pin: String
    func ask(_ text: String, echo: Bool) throws -> String { pin }
    func show(_ text: String, isError: Bool) throws {}
}
