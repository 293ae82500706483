import FoundationEssentials

// Offline login (docs/protocol.md, "Offline login"): the manager's policy reaches the device in signed answers, and
// the device reports what happened offline in its next device-signed authentication start.

/// What the manager allows a device while it cannot be reached. Carried in the signed start, personalization and
/// change-PIN answers.
public struct OfflinePolicyMessage: Codable, Equatable, Sendable {
    /// How long after the last online login an offline login is allowed; 0: never.
    public var graceMilliseconds: Int64
    /// Wrong offline PINs that end offline login until the next online one.
    public var maxFailures: Int
    /// Changes with every change of the activation's PIN: a verifier of another generation holds an old PIN.
    public var pinGeneration: Int64
    /// The last offline event the manager has recorded for this device; the device drops those up to it.
    public var reportedThrough: Int64

    public init(graceMilliseconds: Int64, maxFailures: Int, pinGeneration: Int64, reportedThrough: Int64) {
        self.graceMilliseconds = graceMilliseconds
        self.maxFailures = maxFailures
        self.pinGeneration = pinGeneration
        self.reportedThrough = reportedThrough
    }

    public var allowsOfflineLogin: Bool { graceMilliseconds > 0 && maxFailures > 0 }
}

public enum OfflineEventKind: String, Codable, Sendable, CaseIterable {
    /// A login the TPM let in with the right PIN.
    case login
    /// A wrong PIN, counted before the TPM was asked.
    case wrongPIN
}

public struct OfflineEventMessage: Codable, Equatable, Sendable {
    /// Increasing per device, from 1; the manager records each one once.
    public var sequence: Int64
    /// On the device's clock, milliseconds since 1970.
    public var at: Int64
    public var kind: OfflineEventKind
    /// The PAM service (login, sudo, a screen locker's).
    public var service: String

    public init(sequence: Int64, at: Int64, kind: OfflineEventKind, service: String) {
        self.sequence = sequence
        self.at = at
        self.kind = kind
        self.service = service
    }
}

/// In a device-signed authentication start: the offline events the manager has not acknowledged.
public struct OfflineReportMessage: Codable, Equatable, Sendable {
    public var events: [OfflineEventMessage]
    /// Logins dropped from a full list (wrong PINs are never dropped).
    public var droppedLogins: Int

    public init(events: [OfflineEventMessage], droppedLogins: Int) {
        self.events = events
        self.droppedLogins = droppedLogins
    }

    /// So a full report with the longest service names stays within the manager's 16 KiB request body.
    public static let maximumEvents = 100
}

extension OfflineReportMessage: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        var previous: Int64 = 0
        for event in events {
            try Limit.require(
                event.sequence > previous && event.at >= 0, "offlineReport.events",
                "must have increasing sequence numbers and a time")
            try Limit.line(
                "offlineReport.events.service", event.service, maximum: WireLimit.identifier, allowsEmpty: false)
            previous = event.sequence
        }
        try Limit.list("offlineReport.events", events, maximum: Self.maximumEvents)
        try Limit.require((0...1_000_000).contains(droppedLogins), "offlineReport.droppedLogins", "is out of range")
    }
}
