import Foundation
import Testing
import XignProtocol
import XignTestSupport

@testable import XignManager

/// The decision on a waiting login, shared by both approval protocols: the typed code, then the approval.
@Suite struct ConfirmationDecisionTests {
    @Test func theRightCodeOpensTheLoginAndWrongOnesAreCountedUntilItIsRefused() async throws {
        try await ManagerBlocks.with { blocks in
            let account = try await blocks.account()
            let device = try await blocks.enrolDevice(of: account)
            let decision = blocks.manager.confirmations
            let login = try await blocks.waitingLogin(for: account, code: "004711")
            #expect(
                try await decision.checkCode("004711", confirmationId: login.id, deviceId: device.id).id == login.id)
            #expect(try await blocks.confirmation(login.id).openedAt != nil, "a device is deciding it")

            for (typed, left) in [("004712", 2), ("", 1), (nil, 0)] as [(String?, Int)] {
                let wrong = await #expect(throws: ManagerError.self) {
                    try await decision.checkCode(typed, confirmationId: login.id, deviceId: device.id)
                }
                #expect(wrong?.status == .unprocessableContent && wrong?.detail.code == .wrongCode)
                #expect(
                    wrong?.description.contains(left > 0 ? "\(left) attempt(s) left" : "the login was refused") == true)
            }
            let record = try await blocks.confirmation(login.id)
            #expect(record.state == .denied && decision.ending(of: record, in: record.state) == .wrongCodes)
            let late = await #expect(throws: ManagerError.self) {
                try await decision.checkCode("004711", confirmationId: login.id, deviceId: device.id)
            }
            #expect(late?.detail.code == .sessionInvalid, "the right code no longer helps")
            let refusals = try await blocks.audit().filter { $0.event == .approvalRefused }
            #expect(
                refusals.count == 3
                    && refusals.last?.detail?.contains("wrong code (3 of 3); the login is refused") == true)
        }
    }

    /// A device of another account learns nothing (the same answer as an unknown login), charges no code failure, and
    /// does not mark the login opened; the audit names it.
    @Test func aDeviceOfAnotherAccountIsRefusedWithoutTouchingTheLogin() async throws {
        try await ManagerBlocks.with { blocks in
            let alice = try await blocks.account()
            let mallory = try await blocks.enrolDevice(of: try await blocks.account("mallory@example.org"))
            let login = try await blocks.waitingLogin(for: alice)
            let foreign = await #expect(throws: ManagerError.self) {
                try await blocks.manager.confirmations.checkCode(
                    "123456", confirmationId: login.id, deviceId: mallory.id)
            }
            #expect(foreign?.status == .conflict && foreign?.detail.code == .sessionInvalid)
            let record = try await blocks.confirmation(login.id)
            #expect(record.state == .pending && record.codeFailures == 0 && record.openedAt == nil)
            let refusal = try #require(try await blocks.audit().last)
            #expect(refusal.event == .approvalRefused && refusal.detail?.contains("another account") == true)
            #expect(refusal.actor == "device \(mallory.id)")

            let own = try await blocks.enrolDevice(of: alice)
            #expect(
                try await blocks.manager.confirmations.checkCode("123456", confirmationId: login.id, deviceId: own.id)
                    .id == login.id)
        }
    }

    /// The approval decides the login once, writes the audit, and wakes what waits on it: a reading kept for the
    /// account's devices is read again after the approval, not served stale.
    @Test func anApprovalDecidesOnceAndWakesTheWaiters() async throws {
        try await ManagerBlocks.with { blocks in
            let account = try await blocks.account()
            let device = try await blocks.enrolDevice(of: account)
            let login = try await blocks.waitingLogin(for: account)
            let wakeUps = blocks.manager.wakeUps
            let kept = try await wakeUps.waitForPendingConfirmations(of: account.id, upTo: 0) { _ in true }
            #expect(kept.map(\.id) == [login.id])

            let service = try blocks.manager.services.service(for: .confirmation(id: login.id))
            let approved = try await blocks.manager.confirmations.approve(
                login.id, by: device.id, of: account.activationId, email: account.email, at: service, role: "login")
            #expect(approved.relyingPartyName == "db1" && approved.loginName == "alice")
            let record = try await blocks.confirmation(login.id)
            #expect(record.state == .approved && record.approvedBy == device.id)
            #expect(try await wakeUps.waitForPendingConfirmations(of: account.id, upTo: 0) { _ in true }.isEmpty)
            let audit = try #require(try await blocks.audit().last)
            #expect(audit.event == .login && audit.host == "db1" && audit.actor == "device \(device.id)")

            let twice = await #expect(throws: ManagerError.self) {
                try await blocks.manager.confirmations.approve(
                    login.id, by: device.id, of: account.activationId, email: account.email, at: service, role: "login")
            }
            #expect(twice?.detail.code == .sessionInvalid)
            #expect(try await blocks.audit().count { $0.event == .login } == 1)
        }
    }

    @Test func aDenialIsTheUsersUnlessTheCodesRanOut() async throws {
        try await ManagerBlocks.with { blocks in
            let login = try await blocks.waitingLogin(for: try await blocks.account())
            let decision = blocks.manager.confirmations
            #expect(decision.ending(of: login, in: .pending) == nil)
            #expect(decision.ending(of: login, in: .denied) == .denied)
            var failed = login
            failed.codeFailures = blocks.manager.configuration.confirmation.maxCodeFailures
            #expect(decision.ending(of: failed, in: .denied) == .wrongCodes)
        }
    }
}

/// An account's queue of waiting logins: the caps per source and per account, and the code.
@Suite struct ConfirmationQueueTests {
    static func makeRoom(
        _ blocks: ManagerBlocks, for account: ManagerBlocks.Account, from remoteHost: String = "192.0.2.1",
        at createdAt: Int64
    ) async throws -> String? {
        let new = try ManagerBlocks.login(for: account, from: remoteHost, createdAt: createdAt)
        let queue = blocks.manager.confirmationQueue
        return try await blocks.write { store in try await queue.makeRoom(for: new, of: account.id, in: store) }
    }

    @Test func aFullSourceGivesUpItsOldestUnopenedLogin() async throws {
        try await ManagerBlocks.with { blocks in
            let account = try await blocks.account()
            let now = IdentityManager.now()
            var logins: [ManagerStore.ConfirmationRecord] = []
            for offset in Int64(0)..<3 {
                logins.append(try await blocks.waitingLogin(for: account, createdAt: now + offset))
            }
            let waiting = logins
            #expect(try await Self.makeRoom(blocks, for: account, from: "198.51.100.7", at: now + 3) == nil)
            try await blocks.write { try await $0.markOpened(waiting[0].id, now: now + 3) }
            let room = try await Self.makeRoom(blocks, for: account, at: now + 4)
            #expect(room == waiting[1].id, "the oldest one nobody opened")
            #expect(try await blocks.confirmation(waiting[1].id).state == .expired)
            #expect(try await blocks.confirmation(waiting[0].id).state == .pending)
        }
    }

    @Test func aQueueOfOpenedLoginsRefusesTheNextOne() async throws {
        try await ManagerBlocks.with { blocks in
            let account = try await blocks.account()
            let now = IdentityManager.now()
            for offset in Int64(0)..<3 {
                let login = try await blocks.waitingLogin(for: account, createdAt: now + offset)
                try await blocks.write { try await $0.markOpened(login.id, now: now + offset) }
            }
            let full = await #expect(throws: ManagerError.self) {
                try await Self.makeRoom(blocks, for: account, at: now + 3)
            }
            #expect(full?.status == .tooManyRequests && full?.description.contains("3 logins to alice") == true)
        }
    }

    @Test func theAccountsCapCountsEverySource() async throws {
        try await ManagerBlocks.with { blocks in
            let account = try await blocks.account()
            let now = IdentityManager.now()
            let cap = blocks.manager.configuration.confirmation.maxPendingPerAccount
            let first = try await blocks.waitingLogin(for: account, from: "203.0.113.0", createdAt: now)
            for source in 1..<cap {
                _ = try await blocks.waitingLogin(
                    for: account, from: "203.0.113.\(source)", createdAt: now + Int64(source))
            }
            let room = try await Self.makeRoom(blocks, for: account, from: "192.0.2.99", at: now + Int64(cap))
            #expect(room == first.id)
        }
    }

    /// Six digits, each position taking every digit: 2,000 codes miss one with a chance below 10^-90.
    @Test func aCodeIsSixDigitsDrawnFromAllOfThem() throws {
        let codes = try (0..<2_000).map { _ in try ConfirmationQueue.code() }
        #expect(codes.allSatisfy { $0.count == 6 && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) })
        for position in 0..<6 {
            #expect(Set(codes.map { Array($0)[position] }).count == 10, "position \(position)")
        }
    }
}
