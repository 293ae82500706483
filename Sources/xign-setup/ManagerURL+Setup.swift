import ArgumentParser
import FoundationEssentials
import XignCore
import XignDevice
import XignLogin
import XignProtocol
import XignTerminal

#if canImport(Glibc)
import Glibc
#endif

extension Date {
    var iso8601: String { formatted(.iso8601) }
}

/// Reads a manager URL option; the transport policy is checked where the URL is used.
func parseManagerURL(_ text: String) throws -> ManagerURL {
    do { return try ManagerURL(text) } catch { throw ValidationError("\(error)") }
}

extension ManagerURL {
    /// Invariant 1, checked before any prompt so the user learns it first.
    func checkTransportPolicyAsSdkError() throws {
        do { try checkTransportPolicy() } catch { throw XignSdkError(.insecureTransport, "\(error)") }
    }
}
