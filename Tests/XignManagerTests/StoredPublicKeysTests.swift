import Foundation
import Testing
import XignCrypto

@testable import XignManager

/// Stored device and host keys are parsed once and then shared, within a bound, and a shared key verifies correctly from
/// many tasks at once.
@Suite struct StoredPublicKeysTests {
    static func stored(_ key: P256PrivateKey) -> String { Base64URL.encode(key.publicKey.derRepresentation) }

    @Test func aStoredKeyIsParsedOnceAndACorruptOneIsNotKept() throws {
        let keys = StoredPublicKeys(capacity: 8)
        let device = try P256PrivateKey()
        #expect(keys.key(Self.stored(device)) == device.publicKey)
        #expect(keys.key(Self.stored(device)) == device.publicKey)
        #expect(keys.count == 1)
        #expect(keys.key("not a key") == nil)
        #expect(keys.key(String(Self.stored(device).dropLast(4))) == nil, "a truncated key")
        #expect(keys.count == 1)
    }

    @Test func noMoreKeysAreKeptThanTheCapacity() throws {
        let keys = StoredPublicKeys(capacity: 8)
        let devices = try (0..<20).map { _ in try P256PrivateKey() }
        for device in devices { #expect(keys.key(Self.stored(device)) == device.publicKey) }
        #expect(keys.count == 8)
        // One that was pushed out is parsed again, correctly.
        #expect(keys.key(Self.stored(devices[0])) == devices[0].publicKey)
        #expect(keys.count == 8)
    }

    /// One parsed key in use by many tasks at once: every right signature verifies and every wrong one fails.
    @Test func aSharedKeyVerifiesFromManyTasksAtOnce() async throws {
        let keys = StoredPublicKeys(capacity: 8)
        let device = try P256PrivateKey()
        let message = Data("login".utf8)
        let (right, wrong) = (try device.signature(for: message), try P256PrivateKey().signature(for: message))
        let text = Self.stored(device)
        let results = await withTaskGroup(of: (Bool, Bool).self) { group in
            for _ in 0..<8 {
                group.addTask {
                    var (allRight, anyWrong) = (true, false)
                    for _ in 0..<200 {
                        guard let key = keys.key(text) else { return (false, true) }
                        allRight = allRight && key.isValidSignature(right, for: message)
                        anyWrong = anyWrong || key.isValidSignature(wrong, for: message)
                    }
                    return (allRight, anyWrong)
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 8 && results.allSatisfy { $0 == (true, false) })
    }
}
