import Foundation
import Testing
import XignProtocol
import XignTestSupport

@testable import XignManager

/// How the manager takes a body: a clear PIN refused first, then the shape, then the wire's limits.
@Suite struct RequestBodyTests {
    static func decode(_ json: String) throws -> DeviceSignedRequest {
        try RequestBody.decode(DeviceSignedRequest.self, from: Data(json.utf8), "the request")
    }

    @Test func aWellFormedBodyWithinItsLimitsIsTaken() throws {
        let request = try Self.decode(#"{"deviceId":"d","challenge":"c","nonce":"n"}"#)
        #expect(request == DeviceSignedRequest(deviceId: "d", challenge: "c", nonce: "n"))
    }

    @Test func aPINInTheClearIsRefusedBeforeAnythingElse() {
        for json in [
            #"{"deviceId":"d","challenge":"c","nonce":"n","pin":"24680"}"#, #"{"newPin":"24680"}"#,
            #"{"newActivation":{"pin":"24680"}}"#,
        ] {
            let refused = #expect(throws: ManagerError.self) { try Self.decode(json) }
            #expect(refused?.detail.code == .securityInsufficient && refused?.description.contains("sealed") == true)
        }
    }

    @Test func aBodyOfTheWrongShapeOrPastItsLimitsIsABadRequest() {
        let tooLong = String(repeating: "c", count: 100_000)
        for (json, says) in [
            ("not json", "not valid JSON"), (#"{"deviceId":"d","nonce":"n"}"#, "not valid JSON"),
            (#"{"deviceId":"d","challenge":"\#(tooLong)","nonce":"n"}"#, "the request: challenge"),
            (#"{"deviceId":"d","challenge":"","nonce":"n"}"#, "the request: challenge"),
        ] {
            let refused = #expect(throws: ManagerError.self) { try Self.decode(json) }
            #expect(refused?.status == .badRequest && refused?.description.contains(says) == true, "\(json.prefix(40))")
        }
    }
}
