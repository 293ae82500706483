/// The fingerprint of RSA keys from Infineon's flawed key generation (ROCA, CVE-2017-15361), whose private key can be
/// computed from the public one: such a modulus is, modulo each small prime below, a power of 65537. A random
/// modulus is so for all of them with a chance far below one in a million.
enum ROCAFingerprint {
    static let primes: [UInt32] = [
        3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 101, 103, 107, 109,
        113, 127, 131, 137,
        139, 149, 151, 157, 163, 167,
    ]

    /// For each prime, the residues that are powers of 65537.
    private static let powers: [Set<UInt32>] = primes.map { prime in
        var residues = Set<UInt32>()
        var value: UInt32 = 1
        let generator = 65537 % prime
        while residues.insert(value).inserted { value = value * generator % prime }
        return residues
    }

    /// Whether the big-endian `modulus` has the fingerprint.
    static func matches(_ modulus: some Sequence<UInt8>) -> Bool {
        var residues = [UInt32](repeating: 0, count: primes.count)
        for byte in modulus {
            for index in primes.indices { residues[index] = (residues[index] << 8 | UInt32(byte)) % primes[index] }
        }
        return residues.indices.allSatisfy { powers[$0].contains(residues[$0]) }
    }
}
