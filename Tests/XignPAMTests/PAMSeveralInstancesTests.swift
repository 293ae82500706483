import Foundation
import Testing
import XignTestSupport

/// pam_xign against a manager that runs as two instances on one PostgreSQL database.
@Suite struct PAMSeveralInstancesTests {
    @Test func aUserEnrolledThroughOneInstanceLogsInThroughTheOther() throws {
        let fixture = try PAMFixture(database: .postgreSQL)
        let other = try ManagerProcess(sharingDatabaseWith: fixture.manager)
        // As a load balancer would: the machine now reaches only the second instance; the first is gone.
        try fixture.redirectEnrolments(to: other.url.description)
        fixture.manager.stop()
        let login = try fixture.login()
        #expect(login.code == PAMCode.success, "\(login.conversation)")
        #expect(try fixture.completedLogins("alice") == 1)
        let wrong = try fixture.login(answers: ["13579"])
        #expect(wrong.code == PAMCode.authError)
        #expect(try fixture.failedAttempts("alice@example.org") == 1)
    }
}
