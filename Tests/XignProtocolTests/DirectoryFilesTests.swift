import Testing
import XignProtocol

/// The names and uids of a passwd file, read as libc reads it: by bytes, not by Swift's Characters.
@Suite struct DirectoryFilesTests {
    @Test func aPasswdFileIsSplitByBytesAsLibcSplitsIt() {
        let plain = "root:x:0:0:root:/root:/bin/bash\n+nis::::::\nbroken\nalice:x:1001:1001:Alice:/home/alice:/bin/sh\n"
        #expect(DirectoryFiles.entries(in: plain).map(\.name) == ["root", "alice"])
        #expect(DirectoryFiles.entries(in: plain).map(\.id) == [0, 1001])
        // A combining mark after a `:` makes one Character of the two; the colon still separates the fields.
        let mark = "bob:\u{0658}x:1002:1002::/home/bob:/bin/sh\n"
        #expect(DirectoryFiles.entries(in: mark).map(\.name) == ["bob"])
        #expect(DirectoryFiles.entries(in: mark).map(\.id) == [1002])
        // "\r\n" is one Character too; each line still ends at its "\n".
        let crlf = "carol:x:1003:1003::/home/carol:/bin/sh\r\ndave:x:1004:1004::/home/dave:/bin/sh\r\n"
        #expect(DirectoryFiles.entries(in: crlf).map(\.name) == ["carol", "dave"])
    }
}
