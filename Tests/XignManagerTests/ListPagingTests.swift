import Foundation
import Hummingbird
import Testing
import XignCrypto
import XignProtocol
import XignTestSupport

@testable import XignManager

/// The lists that grow with the organization (accounts, hosts) come a page at a time, in the command and in the
/// console: every entry once, none skipped when one is added meanwhile, and a limit out of range refused with what to
/// give instead. Control: a page that holds the whole list equals the pages put together.
@Suite struct ListPagingTests {
    /// `count` accounts made directly in the store, addressed `a+0000@example.org` on: a `+` in every page's last
    /// address, which a link must encode.
    static func addAccounts(_ count: Int, from first: Int = 0, in inProcess: InProcessManager) async throws {
        try await inProcess.manager.database.transaction { store in
            for n in first..<(first + count) {
                let email = "a+\(String(format: "%04d", n))@example.org"
                try await store.sql.raw(
                    """
                    INSERT INTO accounts (id, email, attributes, is_temporary, created_at)
                    VALUES (\(bind: "paged-\(n)"), \(bind: email), '{}', 0, \(bind: IdentityManager.now()))
                    """
                ).run()
            }
        }
    }

    static func pages<Entry>(
        limit: Int, key: (Entry) -> String, _ list: (ListPage) async throws -> Page<Entry>
    ) async throws -> (entries: [String], sizes: [Int]) {
        var (entries, sizes, after): ([String], [Int], String?) = ([], [], nil)
        repeat {
            let page = try await list(try ListPage(after: after, limit: limit))
            entries += page.entries.map(key)
            sizes.append(page.entries.count)
            after = page.next
        } while after != nil
        return (entries, sizes)
    }

    @Test(arguments: TestDatabase.allCases) func accountsAndHostsComeAPageAtATime(database: TestDatabase) async throws {
        try await InProcessManager.run(database: database) { inProcess in
            let admin = inProcess.manager.administration
            try await Self.addAccounts(23, in: inProcess)
            for n in 0..<5 {
                try await inProcess.manager.database.transaction { store in
                    try await store.insertHost(
                        id: "host-\(n)", name: "h\(n).example.org",
                        publicKey: Base64URL.encode(P256PrivateKey().publicKey.derRepresentation), keyKind: .software,
                        ekIssuer: nil, unattestedBecause: nil, createdAt: IdentityManager.now())
                    try await store.setGroups(["g\(n % 2)", "all"], hostName: "h\(n).example.org")
                }
            }
            try await inProcess.manager.database.transaction { store in
                try await store.sql.raw(
                    "INSERT INTO account_host_groups (account_id, group_name) VALUES ('paged-7', 'ops'), ('paged-7', 'dev')"
                ).run()
            }
            let seventh = try await admin.accounts(try ListPage(after: "a+0005@example.org", limit: 3)).entries
            #expect(seventh.map(\.hostGroups) == [[], ["dev", "ops"], []], "each account with its own host groups")
            let whole = try await admin.accounts(try ListPage(limit: ListPage.maximumLimit))
            #expect(whole.entries.count == 23 && whole.next == nil, "control: one page holds all")
            let paged = try await Self.pages(limit: 5, key: \.email) { try await admin.accounts($0) }
            #expect(paged.entries == whole.entries.map(\.email), "every account once, in the list's order")
            #expect(paged.sizes == [5, 5, 5, 5, 3])

            // An account added behind the cursor is not shown again on later pages; one ahead of it is shown once.
            let first = try await admin.accounts(try ListPage(limit: 10))
            try await Self.addAccounts(1, from: 100, in: inProcess)  // a+0100: after every other
            try await inProcess.manager.database.transaction { store in
                try await store.sql.raw("DELETE FROM accounts WHERE id = 'paged-2'").run()  // before the cursor
            }
            var rest: [String] = []
            var after = first.next
            while let cursor = after {
                let page = try await admin.accounts(try ListPage(after: cursor, limit: 10))
                (rest, after) = (rest + page.entries.map(\.email), page.next)
            }
            #expect(Set(first.entries.map(\.email)).isDisjoint(with: rest))
            #expect(rest.count == 14 && rest.last == "a+0100@example.org", "\(rest)")

            let hosts = try await Self.pages(limit: 2, key: \.name) { try await admin.hosts($0) }
            #expect(hosts.entries == (0..<5).map { "h\($0).example.org" } && hosts.sizes == [2, 2, 1])
            let host = try #require(
                try await admin.hosts(try ListPage(after: "h2.example.org", limit: 1)).entries.first)
            #expect(host.name == "h3.example.org" && host.groups == ["all", "g1"], "each host with its own groups")
        }
    }

    @Test func aLimitOutOfRangeIsRefusedWithWhatToGive() throws {
        for limit in [0, -1, ListPage.maximumLimit + 1] {
            #expect(throws: ManagerError.self) { try ListPage(limit: limit) }
        }
        #expect(throws: ManagerError.self) { try ListPage(after: String(repeating: "x", count: 255)) }
        #expect(try ListPage(after: "x", limit: ListPage.maximumLimit).limit == ListPage.maximumLimit, "control")
    }

    @Test(arguments: TestDatabase.allCases) func theCommandPrintsAPageAndSaysHowToGetTheNext(
        database: TestDatabase
    ) async throws {
        try await InProcessManager.run(database: database) { inProcess in
            try await Self.addAccounts(5, in: inProcess)
            let first = try inProcess.files.admin(["accounts", "list", "--limit", "3"])
            #expect(first.status == 0)
            #expect(
                first.stdout.split(separator: "\n").map { $0.prefix { $0 != "\t" } } == [
                    "a+0000@example.org", "a+0001@example.org", "a+0002@example.org",
                ])
            #expect(
                first.stderr.contains(
                    "more follow; the next page: xign-manager admin accounts list --after 'a+0002@example.org' --limit 3"
                ),
                "\(first.stderr)")
            let last = try inProcess.files.admin([
                "accounts", "--after", "a+0002@example.org", "--limit", "3", "--json",
            ])
            let json = try JSONSerialization.jsonObject(with: Data(last.stdout.utf8)) as? [[String: Any]] ?? []
            #expect(json.compactMap { $0["email"] as? String } == ["a+0003@example.org", "a+0004@example.org"])
            #expect(last.status == 0 && !last.stderr.contains("more follow"), "the last page: \(last.stderr)")
            let refused = try inProcess.files.admin(["hosts", "list", "--limit", "0"])
            #expect(
                refused.status != 0 && refused.stderr.contains("a page holds 1 to 10000 entries, not 0"),
                "\(refused.stderr)")
        }
    }

    @Test(arguments: TestDatabase.allCases) func theConsoleLinksTheNextPage(database: TestDatabase) async throws {
        try await InProcessManager.run(database: database) { inProcess in
            let device = try await inProcess.api.enrolDevice("admin@example.org")
            try await inProcess.manager.administration.setRole(.admin, email: "admin@example.org")
            let (status, token, _) = try await ConsoleAPITests.openSession(inProcess, device)
            #expect(status == 201 || status == 200)
            try await Self.addAccounts(ConsoleController<BasicRequestContext>.accountsShown + 5, in: inProcess)
            let (_, _, first) = try await ConsoleAPITests.page(inProcess, "/console/accounts", token: token)
            let shown = ConsoleController<BasicRequestContext>.accountsShown
            #expect(first.contains("\(shown) account(s) on this page"), "\(first.prefix(2000))")
            let link = try #require(
                first.firstMatch(of: /href="([^"]+)" id="next-page"/).map { String($0.1) },
                "a link to the next page")
            let last = String(format: "%04d", shown - 1)
            #expect(link == "/console/accounts?q=&amp;after=a%2B\(last)%40example.org", "the address encoded")
            let (_, _, second) = try await ConsoleAPITests.page(
                inProcess, link.replacingOccurrences(of: "&amp;", with: "&"), token: token)
            #expect(second.contains("6 account(s).") && !second.contains("next-page"), "\(second.prefix(2000))")
            #expect(second.contains("a+\(String(format: "%04d", shown + 4))@example.org") && second.contains("admin@"))
            #expect(!second.contains("a+\(last)@example.org"), "the first page's last is not shown again")
        }
    }
}
