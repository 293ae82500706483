import Foundation

/// Asks `condition` every `interval` microseconds until it holds or `seconds` pass, then once more; whether it held.
/// An error from `condition` ends the wait.
public func waitUntil(
    seconds: Double = 10, every interval: useconds_t = 20_000, _ condition: () throws -> Bool
) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        usleep(interval)
    }
    return try condition()
}

/// `waitUntil` for async tests: sleeps between the checks instead of holding its thread, so the tasks it waits for
/// (an in-process manager's services) may run on it meanwhile.
public func pollUntil(
    seconds: Double = 10, every interval: Duration = .milliseconds(20), _ condition: () throws -> Bool
) async throws -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        try await Task.sleep(for: interval)
    }
    return try condition()
}

/// Sleeps until just past `milliseconds` since 1970, such as the end of a lock the manager named.
public func sleep(pastEpochMilliseconds milliseconds: Double) async throws {
    let left = Date(timeIntervalSince1970: milliseconds / 1000 + 0.05).timeIntervalSinceNow
    if left > 0 { try await Task.sleep(for: .seconds(left)) }
}
