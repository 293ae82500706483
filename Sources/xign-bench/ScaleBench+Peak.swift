import Foundation
import Synchronization
import XignCore
import XignHarness
import XignProtocol

/// The morning peak on two instances over the filled database: 2,000 hosts waiting for approvals (each long poll 20 s)
/// while 32 machines log in at 100 a second between them, paced (a late login starts at once and its lateness
/// counts); p99 of a login, and each instance's CPU and memory.
extension ScaleBench {
    static let peakLoginsPerSecond = 100.0
    static let peakSeconds = 20.0
    static let peakWaiting = 2_000

    static func peak(_ first: ManagerProcess, hostState: String) throws {
        let second = try ManagerProcess(sharingDatabaseWith: first)
        defer { second.stop() }
        let instances = [first, second]
        let clients = try ManagerBench.enrol(32, at: first, from: 100)
        // Half the machines reach the second instance, as a balancer would send them.
        for index in stride(from: 1, to: clients.count, by: 2) {
            let store = first.directory.file("state\(100 + index)") + "/identity-managers.json"
            let stored = try String(contentsOfFile: store, encoding: .utf8)
            try stored.replacingOccurrences(of: "127.0.0.1:\(first.port)", with: "127.0.0.1:\(second.port)").write(
                toFile: store, atomically: true, encoding: .utf8)
        }
        var configuration = ClientConfiguration()
        configuration.stateDirectory = hostState
        configuration.deviceKey = .software
        let hostConfiguration = configuration
        // 2,000 confirmations: ten for each of 200 accounts (the per-account cap), each from its own address. A start
        // answered busy (its transaction lost to concurrent ones every time) is sent again, as a host would, and counted.
        let busy = Atomic<Int>(0)
        let pending = try onThreads(8) { part in
            let host = try XignSdk(configuration: hostConfiguration, localUser: "root")
            return try stride(from: part, to: peakWaiting, by: 8).map { index in
                while true {
                    do {
                        return try host.startLoginConfirmation(
                            loginName: "scale-\(index / 10 + 1)", service: "sshd",
                            remoteHost: "10.1.\(index / 250).\(index % 250 + 1)", tty: nil, command: nil)
                    } catch let error as XignSdkError where error.message.contains("try again") {
                        busy.add(1, ordering: .relaxed)
                    }
                }
            }
        }.flatMap { $0 }
        let waiters = try instances.indices.map { instance in
            try WaitingHosts(
                port: instances[instance].port,
                confirmations: pending.indices.filter { $0 % 2 == instance }.map {
                    (pending[$0].confirmationId, pending[$0].waitToken)
                },
                waitMilliseconds: 20_000)
        }
        defer { waiters.forEach { $0.stop() } }
        Thread.sleep(forTimeInterval: 2)

        let pids = instances.compactMap(\.pid)
        let database = { ManagerBench.processes(named: "postgres").map(ManagerBench.cpuSeconds).reduce(0, +) }
        let cpuBefore = pids.map(ManagerBench.cpuSeconds), databaseBefore = database()
        let latencies = Mutex<[Double]>([]), failures = Mutex<[String]>([])
        let start = DispatchTime.now().uptimeNanoseconds
        let interval = Double(clients.count) / peakLoginsPerSecond
        _ = try onThreads(clients.count) { index in
            var slot = Double(index) / peakLoginsPerSecond
            while slot < peakSeconds {
                let due = start + UInt64(slot * 1e9)
                let now = DispatchTime.now().uptimeNanoseconds
                if due > now { usleep(UInt32((due - now) / 1000)) }
                do {
                    try clients[index].login()
                    let done = DispatchTime.now().uptimeNanoseconds
                    latencies.withLock { $0.append(Double(done - due) / 1e6) }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
                slot += interval
            }
        }
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        let cpu = zip(pids.map(ManagerBench.cpuSeconds), cpuBefore).map { ($0 - $1) / elapsed * 100 }
        let databaseCPU = (database() - databaseBefore) / elapsed * 100
        let figure = Bench.Figure(name: "peak", milliseconds: latencies.withLock { $0 })
        let dropped = waiters.flatMap { $0.failures.withLock { $0 } }
        print(
            "\nThe morning peak, two instances: \(peakWaiting.formatted()) hosts waiting for an approval (20 s long polls; \(busy.load(ordering: .relaxed)) of their starts answered busy and sent again) while 32 machines log in, \(Int(peakLoginsPerSecond)) a second for \(Int(peakSeconds)) s"
        )
        print(
            String(
                format:
                    "  %d logins in %.1f s, from when each was due: p50 %.1f ms, p99 %.1f ms; %d failed%@; waiting hosts dropped: %d",
                figure.milliseconds.count, elapsed, figure.median, figure.percentile(0.99),
                failures.withLock { $0.count }, failures.withLock { $0.first.map { " (first: \($0))" } ?? "" },
                dropped.count))
        for (index, instance) in instances.enumerated() {
            print(
                String(
                    format: "  instance %d: CPU %.0f %% of a core, RSS %.1f MiB", index + 1, cpu[index],
                    Double(ManagerBench.rss(instance.pid)) / 1024))
        }
        print(String(format: "  PostgreSQL: CPU %.0f %% of a core", databaseCPU))
    }
}
