import Foundation
import Testing
import XignCore
import XignProtocol
import XignTestSupport

/// /metrics on `metrics.listen`, read and parsed by the Prometheus project's own Python parser.
@Suite(.machineShare) struct MetricsTests {
    /// Every sample as "name{label="value",…} value", parsed by prometheus_client (Debian's python3-prometheus-client).
    func scrape(_ port: Int, in directory: TemporaryDirectory) throws -> [String: Double] {
        let script = """
            import sys, urllib.request
            from prometheus_client.parser import text_string_to_metric_families
            text = urllib.request.urlopen("http://127.0.0.1:\(port)/metrics", timeout=5).read().decode()
            for family in text_string_to_metric_families(text):
                for s in family.samples:
                    labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
                    print(f"{s.name}{{{labels}}} {s.value}")
            """
        let result = try ChildProcess("/usr/bin/python3", ["-c", script], in: directory).wait()
        guard result.status == 0 else { throw TestFailure("the metrics do not parse: \(result.stderr)") }
        var samples: [String: Double] = [:]
        for line in result.stdout.split(separator: "\n") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else {
                continue
            }
            samples[String(line[..<space])] = value
        }
        return samples
    }

    @Test func metricsCountLoginsByResultAndLockoutsAndTimeRequestsOnTheirOwnAddress() async throws {
        let manager = try ManagerProcess(config: ManagerProcess.testConfig + "\n[metrics]\nlisten = 127.0.0.1:0\n")
        let api = API(manager: manager)
        let device = try await api.enrolDevice("metrics@example.org")
        let port = try manager.metricsPort()
        let before = try scrape(port, in: manager.directory)
        #expect(before["xign_confirmations_pending{}"] == 0)

        #expect(try await api.authenticate(device, pin: "24680").status == 200)
        // Wrong PINs until one starts a lock (base_delay 300ms); the next start is refused unchecked.
        var locked = false
        for _ in 0..<4 where !locked {
            let answer = try await api.authenticate(device, pin: "13579")
            let lock =
                try answer.signedPayload(key: try api.managerKey, type: SignedAnswerType.authenticationResult)[
                    "lockout"] as? [String: Any]
            locked = (lock?["lockedUntil"] as? Double ?? 0) > Date().timeIntervalSince1970 * 1000
        }
        #expect(locked)
        let refused = try await api.postStart(device)
        #expect(refused.status == 423)
        let after = try scrape(port, in: manager.directory)
        #expect(after["xign_logins_total{result=\"success\"}"] == 1)
        #expect((after["xign_logins_total{result=\"wrong_pin\"}"] ?? 0) >= 1)
        #expect(after["xign_logins_total{result=\"locked\"}"] == 1)
        #expect((after["xign_lockouts_total{}"] ?? 0) >= 1)
        // The HTTP latencies, per route pattern: a histogram whose count matches the finishes answered.
        let finishes =
            "http_server_request_duration_count{http_request_method=\"POST\",http_response_status_code=\"200\",http_route=\"/v1/authentications/finish\"}"
        #expect((after[finishes] ?? 0) >= 2, "\(after.keys.filter { $0.contains("duration_count") }.sorted())")
        // The API's own port does not serve it.
        #expect(try HTTPClient().send("GET", to: manager.url, path: "/metrics", body: nil, headers: []).status == 404)
    }
}
