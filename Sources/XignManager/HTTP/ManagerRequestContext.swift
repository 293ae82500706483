import HTTPTypes
import Hummingbird
import NIOCore

/// The request context of every route: Hummingbird's core storage and the address of the connected peer.
public struct ManagerRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        coreContext = CoreRequestContextStorage(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}

extension Request {
    private static let forwardedFor = HTTPField.Name("X-Forwarded-For")!

    /// The client's address for rate limits (its `AddressKey`): the peer, or, when the peer is a trusted proxy, the
    /// address it appended last to X-Forwarded-For (the ones before it are the client's own claims).
    func clientAddress(_ context: some RemoteAddressRequestContext, trustedProxies: [String]) -> String {
        AddressKey.key(
            for: forwardedAddress(context, trustedProxies: trustedProxies) ?? context.remoteAddress?.ipAddress
                ?? "unknown")
    }

    /// The longest text form of an IP address (IPv6 with an embedded IPv4 address).
    private static let longestAddress = 45

    /// The client a trusted proxy names; nil when the peer is no trusted proxy or names none.
    func forwardedAddress(_ context: some RemoteAddressRequestContext, trustedProxies: [String]) -> String? {
        guard let peer = context.remoteAddress?.ipAddress, trustedProxies.contains(peer),
            let forwarded = headers[Self.forwardedFor],
            let last = forwarded.split(separator: ",").last?.trimmingCharacters(in: .whitespaces),
            !last.isEmpty, last.utf8.count <= Self.longestAddress,
            last.allSatisfy({ $0.isHexDigit || $0 == "." || $0 == ":" })
        else {
            return nil
        }
        return last
    }
}
