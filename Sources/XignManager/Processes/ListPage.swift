/// One page of a list that grows with the organization (accounts, hosts): the entries after a key in the list's order.
/// Keyset paging, so a page deep in a list of a million costs what the first one does, and an entry added meanwhile
/// is neither skipped nor shown twice.
public struct ListPage: Sendable, Equatable {
    public static let defaultLimit = 1000
    public static let maximumLimit = 10_000

    /// The key (an address, a host name) the page starts after; empty: from the first.
    public let after: String
    public let limit: Int

    /// The first page at the default size.
    public static let first = ListPage(checkedAfter: "", limit: defaultLimit)

    /// Refuses a limit out of range and a key longer than any address or host name.
    public init(after: String? = nil, limit: Int = defaultLimit) throws(ManagerError) {
        guard (1...Self.maximumLimit).contains(limit) else {
            throw ManagerError.badRequest("a page holds 1 to \(Self.maximumLimit) entries, not \(limit)")
        }
        guard (after ?? "").utf8.count <= 254 else {
            throw ManagerError.badRequest("a page starts after an address or host name of at most 254 bytes")
        }
        self.init(checkedAfter: after ?? "", limit: limit)
    }

    private init(checkedAfter after: String, limit: Int) { (self.after, self.limit) = (after, limit) }

    /// The page of `found`, which holds up to `limit + 1` entries in order: the one past the page says there is more.
    func cut<Entry>(_ found: [Entry], key: (Entry) -> String) -> Page<Entry> {
        let entries = Array(found.prefix(limit))
        return Page(entries: entries, next: found.count > limit ? entries.last.map(key) : nil)
    }
}

/// The entries of a `ListPage`, and where the next page starts when there is one.
public struct Page<Entry: Sendable>: Sendable {
    public var entries: [Entry]
    public var next: String?
}
