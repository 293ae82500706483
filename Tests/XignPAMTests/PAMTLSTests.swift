import Foundation
import Testing
import XignTestSupport

/// pam_xign against a manager that speaks TLS itself: the right CA logs in; a wrong CA, a certificate for another
/// host or an expired one each stop the login before the PIN is even asked, with a message that says why.
@Suite struct PAMTLSTests {
    /// A fixture whose manager serves `live.pem`/`live.key`, which the test may replace and reload with SIGHUP.
    static func fixture(tpm: SoftwareTPM? = nil) throws -> (PAMFixture, TestCertificates, TemporaryDirectory) {
        let files = TemporaryDirectory()
        let certificates = try TestCertificates(in: files)
        try install(certificates.valid, in: files)
        let config =
            ManagerProcess.testConfig
            + "\n[server]\ntls_certificate = \(files.file("live.pem"))\ntls_key = \(files.file("live.key"))\n"
        return (try PAMFixture(managerConfig: config, tpm: tpm, caFile: certificates.caFile), certificates, files)
    }

    static func install(_ pair: (certificate: String, key: String), in files: TemporaryDirectory) throws {
        for (source, target) in [(pair.certificate, "live.pem"), (pair.key, "live.key")] {
            try writeTestFile(files.file(target), try Data(contentsOf: URL(fileURLWithPath: source)), mode: 0o600)
        }
    }

    /// Puts `pair` in place and waits until the manager reloaded it.
    static func reload(
        _ fixture: PAMFixture, _ pair: (certificate: String, key: String), in files: TemporaryDirectory
    ) throws {
        let before = fixture.manager.log.components(separatedBy: "TLS certificate reloaded").count
        try install(pair, in: files)
        fixture.manager.send(SIGHUP)
        guard
            waitUntil(
                seconds: 10, { fixture.manager.log.components(separatedBy: "TLS certificate reloaded").count > before })
        else {
            throw TestFailure("no reload: \(fixture.manager.log.suffix(400))")
        }
    }

    @Test func theRightCALogsInOverHTTPS() throws {
        let (fixture, _, files) = try Self.fixture()
        #expect(fixture.manager.url.description.hasPrefix("https://"))
        let login = try fixture.login()
        #expect(login.code == PAMCode.success, "\(login.conversation)")
        #expect(try fixture.completedLogins("alice") == 1)
        withExtendedLifetime(files) {}
    }

    @Test(arguments: ["wrong CA", "wrong host", "expired"])
    func aCertificateTheMachineCannotTrustStopsTheLoginBeforeThePIN(_ fault: String) throws {
        let (fixture, certificates, files) = try Self.fixture()
        switch fault {
        case "wrong CA": try Self.reload(fixture, certificates.fromOtherCA, in: files)
        case "wrong host": try Self.reload(fixture, certificates.wrongHost, in: files)
        default: try Self.reload(fixture, certificates.expired, in: files)
        }
        let login = try fixture.login(answers: [])
        #expect(login.code == PAMCode.authInfoUnavailable, "\(login.conversation)")
        #expect(login.conversation.contains("TLS failed"), "\(login.conversation)")
        #expect(!login.conversation.contains("[PROMPT_ECHO_OFF]"), "no PIN prompt: \(login.conversation)")
        #expect(try fixture.failedAttempts("alice@example.org") == 0, "no PIN reached the manager")
        #expect(try fixture.manager.query("SELECT COUNT(*) FROM authentications") == ["0"], "not even a start")
    }

    @Test func aRenewedCertificateIsUsedAfterSIGHUPWithoutARestart() throws {
        let (fixture, certificates, files) = try Self.fixture()
        #expect(try fixture.login().code == PAMCode.success)
        try Self.reload(fixture, certificates.fromOtherCA, in: files)
        #expect(
            try fixture.login(answers: []).code == PAMCode.authInfoUnavailable,
            "the machine does not trust the other CA")
        try Self.reload(fixture, certificates.valid, in: files)
        #expect(try fixture.login().code == PAMCode.success, "the same process serves the valid pair again")
        // A broken pair on reload keeps the old one in use.
        try writeTestFile(files.file("live.key"), Data("not a key".utf8), mode: 0o600)
        fixture.manager.send(SIGHUP)
        #expect(waitUntil(seconds: 10) { fixture.manager.log.contains("TLS certificate not reloaded") })
        #expect(try fixture.login().code == PAMCode.success)
    }
}
