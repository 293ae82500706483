/// Why a passkey's data was refused; `description` says it for a log and an error answer.
public enum WebAuthnError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The bytes are not what the format says (CBOR, authenticator data, COSE key, clientDataJSON).
    case malformed(String)
    /// Well formed, but not for us, not fresh, or not what we asked for.
    case refused(String)

    public var description: String {
        switch self {
        case .malformed(let reason), .refused(let reason): reason
        }
    }
}
