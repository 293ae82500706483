import Testing
import XignProtocol

/// The NSS module's query to xignd: what parses is exactly what encodes, and every other byte string is refused.
@Suite struct DirectoryQueryTests {
    @Test func queriesRoundTripAndEverythingElseIsRefused() throws {
        for query in [DirectoryQuery.name("alice"), .name("_a.b-c9"), .id(1_879_048_192), .id(0), .recheck("alice")] {
            #expect(try DirectoryQuery(parsing: query.encoded) == query)
        }
        let alice = DirectoryQuery.name("alice").encoded
        let refused: [([UInt8], DirectoryQuery.Malformed)] = [
            (Array(alice.prefix(5)), .header),
            ([UInt8(ascii: "X")] + alice.dropFirst(), .header),
            (alice.prefix(2) + [2] + alice.dropFirst(3), .version(2)),
            (alice.prefix(3) + [9] + alice.dropFirst(4), .kind(9)),
            (alice + [0], .key),
            (Array(alice.dropLast()), .key),
            (DirectoryQuery.name("Alice").encoded, .key),
            (DirectoryQuery.name("al:ce").encoded, .key),
            (DirectoryQuery.name(String(repeating: "a", count: 33)).encoded, .key),
            (DirectoryQuery.recheck("al:ce").encoded, .key),
            (Array(DirectoryQuery.id(7).encoded.dropLast()), .key),
        ]
        for (bytes, expected) in refused {
            #expect(throws: expected, "\(bytes)") { try DirectoryQuery(parsing: bytes) }
        }
        #expect(DirectoryQuery.Answer.found.encoded == [UInt8(ascii: "x"), UInt8(ascii: "n"), 1, 0, 0, 0])
    }
}
