import Foundation
import Testing
import XignManager
import XignManagerConfiguration
import XignProtocol

@Suite struct ManagerConfigurationTests {
    @Test func theShippedSampleIsValidAndMatchesTheDefaults() throws {
        let sample = try ManagerConfiguration.load(
            path: OpenAPIValidator.repositoryFile("packaging/config/manager.conf"))
        let defaults = ManagerConfiguration()
        #expect(sample.pinPolicy == defaults.pinPolicy)
        #expect(sample.lockout.maxAttempts == defaults.lockout.maxAttempts)
        #expect(sample.lockout.baseDelayMilliseconds == defaults.lockout.baseDelayMilliseconds)
        #expect(sample.categories.map(\.attributes) == defaults.categories.map(\.attributes))
        #expect(sample.databasePath == defaults.databasePath)
        #expect(sample.limits == defaults.limits)
        #expect(sample.keepExpiredMilliseconds == defaults.keepExpiredMilliseconds)
        #expect(sample.registrationIsOpen && sample.tls == nil && sample.postgreSQL == nil)
        #expect(
            sample.pinHashIterations == defaults.pinHashIterations && sample.pinPepperKind == .file
                && sample.tcti == defaults.tcti)
        #expect(sample.auditKeepMilliseconds == defaults.auditKeepMilliseconds && sample.metricsListen == nil)
    }

    @Test func categoriesAndTheirAttributesAreConfigurable() throws {
        let file = try ConfigFile(
            text: """
                [registration]
                categories = email, idcheck
                category.idcheck.types = idCard
                category.idcheck.attributes = email!, givenName!, familyName!, birthdate!, placeOfBirth!
                """, source: "t.conf")
        let configuration = try ManagerConfiguration(file: file)
        #expect(configuration.categories.map(\.id) == ["email", "idcheck"])
        #expect(configuration.categories[1].types == ["idCard"])
        #expect(configuration.categories[1].attributes.filter(\.isRequired).count == 5)
    }

    @Test(
        arguments: [
            ("[lockout]\nmax_attempts = 0\n", "lockout.max_attempts must be a whole number from 1 to 100"),
            ("[lockout]\nbase_delay = 0s\n", "lockout.base_delay must be a duration"),
            ("[pin]\nmin_length = 9\nmax_length = 6\n", "pin.min_length must not exceed pin.max_length"),
            ("[registration]\ncategories = email\ncategory.email.attributes = email!, shoeSize\n", "names 'shoeSize'"),
            ("[storage]\ndriver = mysql\n", "storage.driver is 'mysql'; use sqlite or postgresql"),
            ("[metrics]\nlisten = 9464\n", "metrics.listen must be HOST:PORT"),
            ("[audit]\nkeep = 10m\n", "audit.keep must be a duration"),
            ("[pin]\nhash_iterations = 500\n", "pin.hash_iterations must be a whole number from 1000"),
            ("[storage]\ndriver = postgresql\n", "storage.driver postgresql needs storage.url"),
            (
                "[storage]\ndriver = postgresql\nurl = postgres://xign:secret@db/xign\n",
                "storage.url holds a password; put it in storage.password_file"
            ),
            ("[storage]\ndriver = postgresql\nurl = postgres://xign@db/xign?sslmode=require\n", "use verify-full"),
            ("[storage]\ndriver = postgresql\nurl = postgres://db/xign\n", "storage.url names no user"),
            ("[server]\ntls_certificate = /etc/ssl/m.pem\n", "server.tls_certificate needs server.tls_key too"),
            ("[limits]\nread_timeout = 0s\n", "limits.read_timeout must be a duration"),
            ("[registration]\nopen = maybe\n", "registration.open"),
            ("[server]\nlisten = everywhere\n", "server.listen must be HOST:PORT"),
            ("[lockuot]\nmax_attempts = 3\n", "unknown setting 'lockuot.max_attempts'"),
            // Names clients send back must be identifiers the API allows.
            (
                "[registration]\ncategories = e mail\n",
                "registration.categories names 'e mail'; use 1 to 64 printable ASCII"
            ),
            ("[registration]\nlinked_services = portäl\n", "registration.linked_services names 'portäl'"),
            ("[services]\nnames = pam\n[service.pam]\nroles = log in\n", "service.pam.roles names 'log in'"),
            ("[mail]\nsmtp_relay = relay\n", "mail.smtp_relay must be HOST:PORT"),
            ("[identity_providers]\nnames = corp\n", "needs identity_provider.corp.issuer"),
            ("IDPissuer = http://idp.example.org\n", "plain http to a host that is not loopback"),
            ("IDPissuer = https://idp.example.org\ntype = saml\n", "identity_provider.corp.type must be openid"),
            ("IDPtype = custom\n", "needs identity_provider.corp.url"),
            ("IDPtype = custom\nurl = https://hr.example.org/x\nsteps = 3\n", "identity_provider.corp.steps"),
            ("IDPissuer = https://idp.example.org\nscopes = email\n", "scopes must include openid"),
            ("IDPissuer = https://idp.example.org\nhost_groups = admins\n", "lists PROVIDER-GROUP:HOST-GROUP"),
            (
                "IDPissuer = https://idp.example.org\n[identity_providers]\ndefault = other\n",
                "names 'other', which identity_providers.names does not list"
            ),
        ].map {
            (
                $0.0.replacingOccurrences(
                    of: "IDP", with: "[identity_providers]\nnames = corp\n[identity_provider.corp]\nclient_id = xign\n"),
                $0.1
            )
        })
    func mistakesAreErrorsThatNameTheLine(text: String, message: String) {
        do {
            _ = try ManagerConfiguration(file: ConfigFile(text: text, source: "m.conf"))
            Issue.record("accepted: \(text)")
        } catch {
            #expect("\(error)".hasPrefix("m.conf:"), "\(error)")
            #expect("\(error)".contains(message), "\(error)")
        }
    }

    /// The fuzz target's seeds (Fuzz/Corpus/manager-config) must load, or the fuzzer starts where nothing is checked.
    @Test func theFuzzSeedsLoad() throws {
        let folder = OpenAPIValidator.repositoryFile("Fuzz/Corpus/manager-config")
        let seeds = try FileManager.default.contentsOfDirectory(atPath: folder)
        #expect(seeds.count >= 3)
        for seed in seeds { _ = try ManagerConfiguration.load(path: folder + "/" + seed) }
    }

    @Test func aPostgreSQLURLGivesHostDatabaseAndTLS() throws {
        let remote = try ManagerConfiguration(
            file: ConfigFile(
                text:
                    "[storage]\ndriver = postgresql\nurl = postgres://xign@db.example.org:6432/idm\npassword_file = /etc/xign-manager/db-password\n",
                source: "m.conf"))
        let settings = try #require(remote.postgreSQL)
        #expect(
            [settings.host, settings.user, settings.database, settings.passwordFile] == [
                "db.example.org", "xign", "idm", "/etc/xign-manager/db-password",
            ])
        #expect(settings.port == 6432 && settings.requiresTLS)
        // On loopback TLS is off unless asked for.
        let local = try ManagerConfiguration(
            file: ConfigFile(
                text: "[storage]\ndriver = postgresql\nurl = postgres://xign@127.0.0.1/idm\n", source: "m.conf"))
        #expect(local.postgreSQL?.requiresTLS == false)
        #expect(
            try ManagerConfiguration(
                file: ConfigFile(
                    text: "[storage]\ndriver = postgresql\nurl = postgres://xign@localhost/idm?sslmode=verify-full\n",
                    source: "m.conf")
            ).postgreSQL?.requiresTLS == true)
    }

    @Test func theLockoutEscalatesAndCannotBeSwitchedOff() {
        var lockout = ManagerConfiguration.Lockout()
        lockout.baseDelayMilliseconds = 1_000
        lockout.maxDelayMilliseconds = 5_000
        lockout.maxAttempts = 6
        let delays = (1...5).map { lockout.lock(afterFailures: $0, now: 0).lockedUntil }
        #expect(delays == [1_000, 2_000, 4_000, 5_000, 5_000])
        #expect(lockout.lock(afterFailures: 6, now: 0).isPermanent)
        lockout.freeAttempts = 2
        #expect(lockout.lock(afterFailures: 2, now: 7).lockedUntil == 7)
        #expect(lockout.lock(afterFailures: 3, now: 0).lockedUntil == 1_000)
    }
}
