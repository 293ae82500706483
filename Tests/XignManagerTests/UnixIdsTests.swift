import Foundation
import Testing
import XignProtocol
import XignTestSupport

@testable import XignManager

/// Users on every machine at the manager: the numbers it gives and the directory each host gets.
@Suite struct UnixIdsTests {
    static let narrow = ManagerFiles.testConfig + "\n[users]\nuid_range = 70000-70002\n"

    func uid(_ blocks: ManagerBlocks, _ email: String) async throws -> Int64? {
        try await blocks.manager.administration.accounts().entries.first { $0.email == email }?.uid
    }

    @Test func numbersAreGivenInOrderOnceAndNeverAgain() async throws {
        try await ManagerBlocks.with(config: Self.narrow) { blocks in
            let admin = blocks.manager.administration
            for name in ["alice", "bob", "carol", "dave"] { _ = try await blocks.account("\(name)@example.org") }
            #expect(try await uid(blocks, "alice@example.org") == nil, "no login name, no number")
            try await admin.setLoginName("alice", email: "alice@example.org")
            try await admin.setLoginName("bob", email: "bob@example.org")
            #expect(try await uid(blocks, "alice@example.org") == 70000)
            #expect(try await uid(blocks, "bob@example.org") == 70001)
            // A new name keeps the number; so does a name taken away and given back.
            try await admin.setLoginName("alice2", email: "alice@example.org")
            try await admin.setLoginName(nil, email: "alice@example.org")
            try await admin.setLoginName("alice", email: "alice@example.org")
            #expect(try await uid(blocks, "alice@example.org") == 70000)
            // A deleted account's number is not given again.
            _ = try await admin.deleteAccount(email: "bob@example.org")
            try await admin.setLoginName("carol", email: "carol@example.org")
            #expect(try await uid(blocks, "carol@example.org") == 70002)
            // The range is used up: the name is refused with what to do, and nothing changed.
            await #expect {
                try await admin.setLoginName("dave", email: "dave@example.org")
            } throws: { "\($0)".contains("widen the range in manager.conf or move it up") }
            let dave = try await admin.accounts().entries.first { $0.email == "dave@example.org" }
            #expect(dave?.loginName == nil && dave?.uid == nil)
        }
    }

    @Test func aHostsDirectoryHoldsWhoMayLogInThereWithTheirLocalGroups() async throws {
        try await ManagerBlocks.with { blocks in
            let admin = blocks.manager.administration
            try await blocks.write { try await $0.setGroups(["db"], hostName: "db1") }
            try await admin.setLocalGroups(["sudo", "docker"], hostGroup: "db")
            try await admin.setLocalGroups(["wheel"], hostGroup: "web")
            for (name, groups) in [("alice", ["db"]), ("bob", ["web"]), ("carol", ["*"]), ("erin", ["db", "web"])] {
                _ = try await blocks.account("\(name)@example.org")
                try await admin.setLoginName(name, email: "\(name)@example.org")
                try await admin.setHostGroups(groups, email: "\(name)@example.org")
            }
            _ = try await blocks.account("dave@example.org")
            try await admin.setHostGroups(["db"], email: "dave@example.org")
            let directory = try await blocks.read { try await $0.directory(hostName: "db1") }
            #expect(
                directory.map(\.loginName) == ["alice", "carol", "erin"], "bob's group is not db1's; dave has no name")
            #expect(directory.map(\.localGroups) == [["docker", "sudo"], [], ["docker", "sudo"]], "only db's groups")
            let alice = try #require(directory.first)
            let byName = try await blocks.read { try await $0.directory(hostName: "db1", loginName: "alice") }
            let byNumber = try await blocks.read { try await $0.directory(hostName: "db1", uid: alice.uid) }
            let refused = try await blocks.read { try await $0.directory(hostName: "db1", loginName: "bob") }
            #expect(byName == [alice] && byNumber == [alice] && refused.isEmpty)
            #expect(
                try await admin.accounts().entries.first { $0.email == "erin@example.org" }?.localGroups == [
                    "docker", "sudo", "wheel",
                ])
        }
    }

    @Test func badRangesAndGroupNamesAreRefusedWithWhatToDo() async throws {
        for range in ["1000-2000", "70002-70000", "70000", "a-b", "70000-4294967295"] {
            #expect(throws: (any Error).self, "\(range)") {
                try ManagerFiles(config: ManagerFiles.testConfig + "\n[users]\nuid_range = \(range)\n").configuration()
            }
        }
        try await ManagerBlocks.with { blocks in
            await #expect {
                try await blocks.manager.administration.setLocalGroups(["Sudo;rm"], hostGroup: "db")
            } throws: { "\($0)".contains("is not a local group name") }
            let mappings = try await blocks.manager.administration.localGroups()
            #expect(mappings.isEmpty)
        }
    }
}
