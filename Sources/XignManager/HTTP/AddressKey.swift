import Foundation

/// What a per-address limit counts by. An IPv6 client is its /64: one customer's network, where it can take any of
/// 2^64 addresses, and each would otherwise get a fresh budget. An IPv4-mapped IPv6 address is the IPv4 address.
/// Anything that is no address (a host name a host reports) is counted lowercased, as given.
enum AddressKey {
    static func key(for address: String) -> String {
        var text = address.lowercased()
        if text.hasPrefix("["), text.hasSuffix("]") { text = String(text.dropFirst().dropLast()) }
        if let zone = text.firstIndex(of: "%") { text = String(text[..<zone]) }
        var v6 = in6_addr()
        guard text.contains(":"), inet_pton(AF_INET6, text, &v6) == 1 else { return text }
        let bytes = withUnsafeBytes(of: v6) { Array($0) }
        if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
            return bytes[12...].map(String.init).joined(separator: ".")
        }
        let groups = stride(from: 0, to: 8, by: 2).map {
            String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16)
        }
        return groups.joined(separator: ":") + "::/64"
    }
}
