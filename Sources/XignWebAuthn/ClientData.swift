import FoundationEssentials

/// The clientDataJSON a browser signs over (WebAuthn §5.8.1): what it did, for which challenge and origin.
struct ClientData: Decodable {
    static let maximumLength = 4096

    var type: String
    var challenge: String
    var origin: String
    var crossOrigin: Bool?

    init(_ json: Data) throws(WebAuthnError) {
        guard json.count <= Self.maximumLength else { throw .malformed("the clientDataJSON is too long") }
        do { self = try JSONDecoder().decode(ClientData.self, from: json) } catch {
            throw .malformed("the clientDataJSON is not JSON with type, challenge and origin")
        }
    }
}
