import Foundation
import Testing
import XignCrypto
import XignProtocol

/// The finish's answer is an enum of its cases, and its JSON is the one the clients and the web app have read from
/// the start: the outcome's name beside the fields that case carries.
@Suite struct AuthenticationResultTests {
    static let login = ServiceLoginMessage(
        authorizationCode: nil, issuedAt: 1_000, expiresAt: 61_000, service: "pam", relyingPartyName: "Servers",
        role: "login")
    static let lock = LockoutMessage(isPermanent: false, lockedUntil: 3_000, failedAttempts: 1, issuedAt: 1_000)
    static let approval = UserLoginMessage(relyingPartyName: "db1", role: "confirm", loginName: "alice")

    static let outcomes: [(AuthenticationOutcome, String)] = [
        (
            .serviceLogin(login, loginToken: "a.b.c"),
            #""loginToken":"a.b.c","nonce":"n","outcome":"serviceLogin","serviceLogin":{"#
        ),
        (.serviceLogin(login, loginToken: nil), #""nonce":"n","outcome":"serviceLogin","serviceLogin":{"#),
        (.lockout(lock, nextChallenge: "c2"), #""lockout":{"failedAttempts":1,"#),
        (.lockout(lock, nextChallenge: nil), #""lockout":{"failedAttempts":1,"#),
        (
            .mergeComplete(mergedEmail: "a@example.org"),
            #"{"mergedEmail":"a@example.org","nonce":"n","outcome":"mergeComplete"}"#
        ),
        (.userLogin(approval), #""outcome":"userLogin","userLogin":{"loginName":"alice","#),
        (
            .apiAccess(ApiAccessGrantMessage(process: .changePin, grant: "g", issuedAt: 1, expiresAt: 2)),
            #"{"apiAccess":{"expiresAt":2,"grant":"g","#
        ),
    ]

    @Test(arguments: 0..<outcomes.count) func eachOutcomeTravelsAsItself(index: Int) throws {
        let (outcome, expected) = Self.outcomes[index]
        let message = AuthenticationResultMessage(nonce: "n", outcome: outcome)
        let json = String(decoding: try JSONEncoder.canonical.encode(message), as: UTF8.self)
        #expect(json.contains(expected), "\(json)")
        #expect(try JSONDecoder().decode(AuthenticationResultMessage.self, from: Data(json.utf8)) == message)
    }

    /// The fields a case carries only with it: `nextChallenge` is absent when the lock is permanent, and no other
    /// case's field is written.
    @Test func onlyTheCasesOwnFieldsAreWritten() throws {
        let json = String(
            decoding: try JSONEncoder.canonical.encode(
                AuthenticationResultMessage(nonce: "n", outcome: .lockout(Self.lock, nextChallenge: nil))),
            as: UTF8.self)
        #expect(
            json
                == #"{"lockout":{"failedAttempts":1,"isPermanent":false,"issuedAt":1000,"lockedUntil":3000},"nonce":"n","outcome":"lockout"}"#
        )
    }

    /// A case without its field, or an outcome nobody knows, is no answer; the control beside each is the same
    /// answer whole.
    @Test func aCaseWithoutItsFieldOrAnUnknownOutcomeIsRefused() throws {
        let decode = { (json: String) in
            try JSONDecoder().decode(AuthenticationResultMessage.self, from: Data(json.utf8))
        }
        #expect(throws: DecodingError.self) { try decode(#"{"nonce":"n","outcome":"lockout"}"#) }
        #expect(throws: DecodingError.self) {
            try decode(
                #"{"nonce":"n","outcome":"userLogin","lockout":{"failedAttempts":1,"isPermanent":false,"issuedAt":1000,"lockedUntil":3000}}"#
            )
        }
        #expect(throws: DecodingError.self) {
            try decode(#"{"nonce":"n","outcome":"granted","mergedEmail":"a@example.org"}"#)
        }
        #expect(throws: DecodingError.self) { try decode(#"{"nonce":"n","outcome":"mergeComplete"}"#) }
        #expect(
            try decode(#"{"nonce":"n","outcome":"mergeComplete","mergedEmail":"a@example.org"}"#).outcome
                == .mergeComplete(mergedEmail: "a@example.org"))
        #expect(
            try decode(
                #"{"nonce":"n","outcome":"lockout","lockout":{"failedAttempts":1,"isPermanent":false,"issuedAt":1000,"lockedUntil":3000}}"#
            )
            .outcome
                == .lockout(Self.lock, nextChallenge: nil))
    }
}
