/// Where the P-256 key of a device or host lives: one type for the key stores, the wire, the state file and the
/// manager's rows. The manager learns it and may refuse software keys (docs/design.md, invariant 4).
public enum KeyKind: String, Codable, Sendable, CaseIterable {
    case software, tpm
    /// A WebAuthn credential in an authenticator a browser reaches; only the manager makes such a device.
    case passkey
}
