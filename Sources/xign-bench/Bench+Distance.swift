import Foundation
import XignCore
import XignHarness
import XignLogin
import XignProtocol

/// What a person feels over a network: a login's wall time at a distance beside its floor there, and how soon an
/// administrator's lock, unlock or device removal reaches a host.
extension Bench {
    static let roundTrips = [0, 20, 80]

    /// A manager with TLS behind a relay that adds the round trip (DelayingRelay: a model, as this kernel has no
    /// netem), one enrolment reaching it through the relay, and a fresh client per login, as each PAM process is.
    static func distanceFigures() throws {
        let files = TemporaryDirectory()
        let certificates = try TestCertificates(in: files)
        let port = try ManagerProcess.freePort()
        let relay = try DelayingRelay(to: port)
        defer { relay.stop() }
        let config =
            ManagerBench.config
            + "\n[server]\ntls_certificate = \(certificates.valid.certificate)\ntls_key = \(certificates.valid.key)\n"
            + "public_url = https://127.0.0.1:\(relay.port)\n"
        let manager = try ManagerProcess(config: config, port: port)
        defer { manager.stop() }
        let client = try ManagerBench.enrol(1, at: manager, caFile: certificates.caFile)[0]
        let configuration = client.sdk.configuration
        let relayed = try ManagerURL("https://127.0.0.1:\(relay.port)")
        /// One login as a new PAM process makes it: a new connection and TLS handshake.
        func login(kept sdk: XignSdk? = nil) throws -> LoginOutcome {
            let sdk = try sdk ?? XignSdk(configuration: configuration, localUser: client.user)
            return try LocalLogin(
                sdk: sdk, enrolment: try sdk.store.entity(client.idmIdentifier), service: "pam", role: "login",
                conversation: BenchConversation(pin: ManagerBench.pin)
            ).run()
        }
        print(
            "\nA login at a network distance (TLS 1.3; the distance is a model: a relay holds each chunk half the round trip each way and a new connection's first bytes one more, for its TCP handshake; no netem in this kernel)"
        )
        print(
            "round trip   whole login p50 ms   floor p50 ms   login / floor   kept connection p50 ms   5 round trips ms"
        )
        for rtt in roundTrips {
            relay.roundTripMilliseconds = rtt
            let runs = rtt >= 80 ? 15 : 30
            let whole = try measure("login", runs: runs) { _ in
                guard try login() == .signedIn else { throw XignSdkError(.invalidManagerResponse, "no login") }
            }
            // The floor in this run: the same connection set-up and three requests that do no work.
            let floor = try measure("floor", runs: runs) { _ in
                let http = HTTPClient(configuration: configuration.http)
                for _ in 0..<3 { _ = try http.send("GET", to: relayed, path: APIPath.health) }
            }
            // What a long-lived process could do and a PAM process cannot: keep the connection between logins.
            let keptSDK = try XignSdk(configuration: configuration, localUser: client.user)
            _ = try login(kept: keptSDK)
            let kept = try measure("kept", runs: runs) { _ in _ = try login(kept: keptSDK) }
            print(
                String(
                    format: "%7d ms   %18.1f   %12.1f   %12.2f×   %22.1f   %16d", rtt, whole.median, floor.median,
                    whole.median / floor.median, kept.median, 5 * rtt))
        }
        print(
            "A PAM process lives for one login (sshd forks one per connection), so it cannot keep the connection or a TLS session for the next; xign keeps one connection for the three requests of a login, and TLS 1.3 needs one round trip for its handshake."
        )
        relay.roundTripMilliseconds = 0
        try reachFigures(manager: manager, client: client, login: { try login() })
    }

    /// The time from an administrator's command to the first login of a host that obeys it: the host asks the
    /// manager at every login, so it is the command's own time and one login. An offline laptop learns nothing until
    /// it is online again: its reach is the offline grace, by design.
    static func reachFigures(
        manager: ManagerProcess, client: ManagerBench.Client, login: () throws -> LoginOutcome
    ) throws {
        let email = "bench0@example.org"
        func reach(_ arguments: [String], expect expected: (Result<LoginOutcome, any Error>) -> Bool) throws -> Double {
            let started = DispatchTime.now().uptimeNanoseconds
            let command = try manager.admin(arguments)
            guard command.status == 0 else {
                throw XignSdkError(.invalidInput, "admin \(arguments.joined(separator: " ")): \(command.stderr)")
            }
            let outcome = Result { try login() }
            guard expected(outcome) else {
                throw XignSdkError(.invalidManagerResponse, "after \(arguments[1]): \(outcome)")
            }
            return Double(DispatchTime.now().uptimeNanoseconds - started) / 1_000_000
        }
        let refused = { (outcome: Result<LoginOutcome, any Error>) in
            if case .failure(let error as XignSdkError) = outcome { return error.errorCode == .accountLocked }
            return false
        }
        let signedIn = { (outcome: Result<LoginOutcome, any Error>) in (try? outcome.get()) == .signedIn }
        var locks: [Double] = [], unlocks: [Double] = []
        for _ in 0..<10 {
            locks.append(try reach(["accounts", "lock", email], expect: refused))
            unlocks.append(try reach(["accounts", "unlock", email], expect: signedIn))
        }
        let removal = try reach(["accounts", "revoke-device", email, client.idmIdentifier]) { outcome in
            if case .failure = outcome { return true }
            return false
        }
        let command = try measure("command", runs: 10) { _ in _ = try manager.admin(["accounts", "list"]) }
        print("\nReach: from the administrator's command to the first host login that obeys it (online host, loopback)")
        print(
            String(
                format:
                    "lock → refused login: p50 %.1f ms; unlock → login: p50 %.1f ms; device removed → refused login: %.1f ms (one run)",
                Figure(name: "", milliseconds: locks).median, Figure(name: "", milliseconds: unlocks).median, removal))
        print(
            String(
                format:
                    "of which the command itself (xign-manager admin, a process that opens the database): p50 %.1f ms; an offline laptop obeys when it is online again, within the offline grace (7 days by default)",
                command.median))
    }
}
