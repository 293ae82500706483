import XignProtocol

/// How strongly a device's or host's key must be bound to hardware (`require_hardware_key`). Each level admits what
/// the ones above it admit.
public enum HardwareKeyRequirement: Int, Sendable, Comparable, CustomStringConvertible {
    /// Any key.
    case none
    /// A key the client says is in a TPM, or a device-bound passkey; not a software key or a synced passkey.
    case claimed
    /// A TPM key whose TPM proved it: an EK certificate that chains to a CA in `attestation.ca_directory`, a credential
    /// only that TPM could activate, and a certification of the key by a key in the same TPM.
    case attested

    public static func < (left: Self, right: Self) -> Bool { left.rawValue < right.rawValue }

    public var description: String {
        switch self {
        case .none: "no"
        case .claimed: "tpm"
        case .attested: "attested"
        }
    }

    /// `no` (or false), `tpm` (or true, as before there was a choice), `attested`.
    static func parse(
        _ text: String, key: String, fail: (String, String) -> ConfigFile.ParseError
    ) throws -> HardwareKeyRequirement {
        switch text.lowercased() {
        case "no", "false", "off", "0": return .none
        case "tpm", "yes", "true", "on", "1": return .claimed
        case "attested": return .attested
        default: throw fail(key, "must be no, tpm or attested, not '\(DisplayText.sanitized(String(text.prefix(20))))'")
        }
    }
}
