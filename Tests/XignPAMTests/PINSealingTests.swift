import Foundation
import Testing
import XignCore
import XignProtocol
import XignTestSupport

/// PINs travel sealed to the manager's pinned key. A proxy that ends TLS with a certificate the machine trusts (an
/// interceptor, a certificate issued to the wrong party) passes every request on and reads none of the PINs.
@Suite struct PINSealingTests {
    @Test func aTLSInterceptorReadsNoPINOfARegistrationPersonalizationLoginOrPINChange() throws {
        let (first, second) = ("73618529", "94051738")
        let fixture = try PAMFixture(users: [])
        let interceptor = try TLSFrontEnd(to: fixture.manager.port)
        let url = try ManagerURL(interceptor.url)
        try fixture.enrol(
            localUser: "alice", email: "alice@example.org", pin: first, via: url, caFile: interceptor.caFile)
        try fixture.writeConfig(top: "ca_file = \(interceptor.caFile)\n")
        let login = try fixture.login(answers: [first])
        #expect(login.code == PAMCode.success, "\(login.conversation)")

        var configuration = fixture.configuration
        configuration.http.caFile = interceptor.caFile
        let sdk = try XignSdk(configuration: configuration, localUser: "alice")
        let id = try #require(try sdk.store.list().first?.idmIdentifier)
        #expect(try sdk.store.list().first?.managerURL == url, "the enrolment talks through the interceptor")
        #expect(try sdk.changePIN(of: id, from: first, to: second) == 1)
        #expect(try fixture.login(answers: [second]).code == PAMCode.success)

        let transcript = interceptor.transcript
        // The control: the interceptor did see every request body in the clear, sealed PINs included.
        for path in [
            APIPath.registrations, APIPath.personalizationDecrypt, APIPath.authenticationFinish, APIPath.apiAccess,
        ] {
            #expect(transcript.contains("POST \(path) HTTP/1.1"), "\(path) went through the interceptor")
        }
        #expect(transcript.contains("\"sealedPin\"") && transcript.contains("\"sealedNewPin\""))
        #expect(transcript.contains("alice@example.org"), "what is not sealed is readable")
        for pin in [first, second] {
            #expect(!transcript.contains(pin), "PIN \(pin) is nowhere in what the interceptor saw")
        }
    }
}
