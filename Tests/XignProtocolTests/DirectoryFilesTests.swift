import Testing
import XignProtocol

/// The names and uids of a passwd file, read as libc reads it: by bytes, not by Swift's Characters.
@Suite struct DirectoryFilesTests {
    @Test func aPasswdFileIsSplitByBytesAsLibcSplitsIt() {
        func read(_ text: String) -> [String] { DirectoryFiles.entries(in: text).map { "\($0.name) \($0.id)" } }
        #expect(
            read("root:x:0:0:root:/root:/bin/bash\n+nis::::::\nbroken\nalice:x:1001:1001:Alice:/home/alice:/bin/sh\n")
                == ["root 0", "alice 1001"])
        // A combining mark after a `:` makes one Character of the two; the colon still separates the fields.
        #expect(read("bob:\u{0658}x:1002:1002::/home/bob:/bin/sh\n") == ["bob 1002"])
        // "\r\n" is one Character too; each line still ends at its "\n".
        #expect(
            read("carol:x:1003:1003::/home/carol:/bin/sh\r\ndave:x:1004:1004::/home/dave:/bin/sh\r\n")
                == ["carol 1003", "dave 1004"])
    }
}
