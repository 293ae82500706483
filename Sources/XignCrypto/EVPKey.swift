import COpenSSL

/// An OpenSSL key with one owner: this object frees it in deinit, and lends the pointer only for the length of
/// `withPointer`. P256PublicKey and P256PrivateKey hold their keys this way; no code outside holds the raw pointer,
/// so nothing else can free it or outlive it.
///
/// Why it exists: a parsed public key cached beside code that frees what it parsed is a key used after it was
/// freed (the release-only crash of an earlier attempt, docs/security.md). Concurrent use of one key to verify or
/// sign is safe in OpenSSL 3 (openssl-threads(7)); nothing here modifies a key after it is made.
final class EVPKey: @unchecked Sendable {
    private let pointer: OpaquePointer

    /// Takes ownership of `pointer`.
    init(taking pointer: OpaquePointer) { self.pointer = pointer }

    deinit { EVP_PKEY_free(pointer) }

    func withPointer<T>(_ body: (OpaquePointer) throws -> T) rethrows -> T {
        try withExtendedLifetime(self) { try body(pointer) }
    }
}
