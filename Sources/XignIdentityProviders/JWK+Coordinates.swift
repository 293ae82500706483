import Foundation
import JWTKit
import XignCrypto

extension JWK {
    /// The key with each P-256 coordinate exactly 32 bytes, as RFC 7518 (6.2.1.2) asks. Some providers (glewlwyd,
    /// through gnutls) drop a coordinate's leading zero bytes, and then about one key in 128 was refused. The number is
    /// the same; whether the point is on the curve is still checked when the key is made.
    func withFullLengthCoordinates() -> JWK {
        guard curve == .ecdsa(.p256) else { return self }
        var key = self
        key.x = x.map(Self.fullLength)
        key.y = y.map(Self.fullLength)
        return key
    }

    private static func fullLength(_ coordinate: String) -> String {
        let size = 32
        guard let bytes = Base64URL.decode(coordinate), bytes.count != size else { return coordinate }
        let number = bytes.drop { $0 == 0 }
        guard number.count <= size else { return coordinate }
        return Base64URL.encode(Data(count: size - number.count) + number)
    }
}
