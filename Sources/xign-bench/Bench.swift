#if canImport(Glibc)
import Glibc
#endif
import Foundation
import XignCore
import XignProtocol

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
        let bin = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().path
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("xign-bench-\(getpid())").path
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }

        let manager = Process()
        manager.executableURL = URL(fileURLWithPath: bin + "/xign-manager")
        manager.arguments = ["serve", "--data-dir", work + "/manager", "--listen", "127.0.0.1:0", "--port-file", work + "/port"]
        manager.standardOutput = FileHandle.nullDevice
        manager.standardError = FileHandle.nullDevice
        try manager.run()
        defer { kill(manager.processIdentifier, SIGKILL) }
        var port = 0
        for _ in 0..<300 where port == 0 {
            port = Int((try? String(contentsOfFile: work + "/port", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0
            usleep(20_000)
        }
        guard port != 0 else { throw XignSdkError(.managerUnreachable, "xign-manager did not start") }
        let url = try ManagerURL("http://127.0.0.1:\(port)")
        var configuration = ClientConfiguration()
        configuration.stateDirectory = work + "/state"
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

        print("xign bench: manager on \(url), default PIN hashing (60000 PBKDF2 iterations), \(ProcessInfo.processInfo.activeProcessorCount) cores")
        _ = try measure("warm-up", runs: 20) { _ in _ = try http.send("GET", to: url, path: APIPath.health) }
        let floor = try measure("GET /health (floor)", runs: 300) { _ in _ = try http.send("GET", to: url, path: APIPath.health) }
        let parameters = try measure("registration parameters", runs: 200) { _ in _ = try sdk.registry.initializationSynchronous(url: url) }
        var activations: [PersonalizationInitializationData] = []
        let registration = try measure("register (validate, hash PIN, mail)", runs: 40) { run in activations.append(try register("bench\(run)@example.org")) }
        let decrypt = try measure("decrypt with the right PIN", runs: 40) { run in
            _ = try sdk.personalizer().decryptPersonalizationInitializationDataSynchronous(data: activations[run], pin: pin)
        }
        let fresh = try (0..<30).map { try register("whole\($0)@example.org") }
        let personalization = try measure("whole personalization (decrypt + key + personalize)", runs: 30) { run in
            guard case .newPersonalization(let parameters) = try sdk.personalizer().decryptPersonalizationInitializationDataSynchronous(data: fresh[run], pin: pin) else {
                throw XignSdkError(.invalidManagerResponse, "expected newPersonalization")
            }
            _ = try sdk.personalizer().personalizeIdentityManagerSynchronous(parameters: parameters)
        }

        print("")
        print("operation".padding(toLength: 54, withPad: " ", startingAt: 0) + "runs   median ms   p95 ms   × floor")
        for figure in [floor, parameters, registration, decrypt, personalization] {
            let ratio = figure.median / floor.median
            print(figure.name.padding(toLength: 54, withPad: " ", startingAt: 0)
                + String(format: "%4d   %9.2f   %6.2f   %7.1f", figure.milliseconds.count, figure.median, figure.percentile(0.95), ratio))
        }
    }
}
