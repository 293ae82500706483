import ArgumentParser
import Foundation
import XignManager

/// `--after` and `--limit` of a list that grows with the organization.
struct PageOptions: ParsableArguments {
    @Option(help: "Start after this entry (the last one of the page before).") var after: String?
    @Option(help: "At most this many entries (1 to \(ListPage.maximumLimit)).") var limit = ListPage.defaultLimit

    func validate() throws { _ = try page() }

    func page() throws -> ListPage {
        do { return try ListPage(after: after, limit: limit) } catch { throw ValidationError(error.description) }
    }

    /// Says on stderr how to get the next page, when there is one, so a script reading stdout sees only entries.
    func reportNext(of page: Page<some Sendable>, command: String) {
        guard let next = page.next else { return }
        let quoted = "'" + next.replacingOccurrences(of: "'", with: "'\\''") + "'"
        FileHandle.standardError.write(
            Data(
                "more follow; the next page: xign-manager admin \(command) --after \(quoted) --limit \(limit)\n".utf8))
    }
}
