import Foundation
import Testing
import XignCrypto
import XignProtocol

@Suite struct PersonalizationPayloadTests {
    let payload = PersonalizationPayload(
        managerURL: try! ManagerURL("https://idm.example.org:8443/xign"),
        activationId: "0123456789abcdef0123456789abcdef",
        activationSecret: String(repeating: "A", count: 43),
        managerKeyFingerprint: String(repeating: "b", count: 43)
    )

    @Test func deepLinkRoundTrips() throws {
        #expect(try PersonalizationPayload(parsing: payload.deepLink) == payload)
        #expect(payload.deepLink.hasPrefix("xign://personalize?v=1&m=https%3A%2F%2Fidm.example.org%3A8443%2Fxign&a="))
    }

    @Test func appLinkRoundTripsAndKeepsTheSecretInTheFragment() throws {
        #expect(payload.appLink.hasPrefix("https://idm.example.org:8443/xign/link/personalize#v=1&a="))
        #expect(try PersonalizationPayload(parsing: "  \(payload.appLink)\n") == payload)
    }

    /// What a manager makes now: a 128-bit secret and the short fingerprint, both base32.
    let compact = PersonalizationPayload(
        managerURL: try! ManagerURL("https://idm.example.org:8443"),
        activationId: "0123456789abcdef0123456789abcdef",
        activationSecret: Base32.encode(Data(repeating: 7, count: 16)),
        managerKeyFingerprint: Base32.encode(Data(repeating: 9, count: 16))
    )

    @Test func theCompactFormRoundTripsInEitherCaseAndItsAppLinkToo() throws {
        #expect(
            compact.deepLink
                == "XIGN://P/AERUKZ4JVPG66AJDIVTYTK6N54\(compact.activationSecret)\(compact.managerKeyFingerprint)/HTTPS://IDM.EXAMPLE.ORG:8443"
        )
        #expect(try PersonalizationPayload(parsing: compact.deepLink) == compact)
        #expect(
            try PersonalizationPayload(parsing: compact.deepLink.lowercased()) == compact,
            "base32, scheme and host are case-insensitive")
        #expect(try PersonalizationPayload(parsing: compact.appLink) == compact)
        #expect(
            try PersonalizationPayload(parsingMail: "From: m\r\n\r\nScan or open:\r\n  \(compact.deepLink)\r\n")
                == compact)
        let fields = "AERUKZ4JVPG66AJDIVTYTK6N54" + compact.activationSecret + compact.managerKeyFingerprint
        for broken in [
            "XIGN://P/AERUKZ4JVPG66AJDIVTYTK6N54SHORT\(compact.managerKeyFingerprint)/HTTPS://A.B",
            "XIGN://P/" + "1" + fields.dropFirst() + "/HTTPS://A.B",
            "XIGN://P/\(fields)/FTP://A.B",
            "XIGN://P/\(fields)",
        ] {
            #expect(throws: PersonalizationPayload.ParseError.self, "\(broken)") {
                try PersonalizationPayload(parsing: broken)
            }
        }
    }

    @Test func activationLinkFitsA80ColumnQRCode() {
        // Level M holds up to 331 bytes in a symbol that is at most 80 columns wide with its quiet zone.
        #expect(payload.deepLink.utf8.count <= 331)
    }

    @Test(arguments: [
        ("", "starts neither"),
        ("https://example.org/", "starts neither"),
        (
            "xign://personalize?v=2&m=https%3A%2F%2Fa.b&a=0123456789abcdef0123456789abcdef&s=\(String(repeating: "A", count: 43))&k=\(String(repeating: "b", count: 43))",
            "version 2"
        ),
        (
            "xign://personalize?v=1&m=https%3A%2F%2Fa.b&a=XYZ&s=\(String(repeating: "A", count: 43))&k=\(String(repeating: "b", count: 43))",
            "activation id"
        ),
        (
            "xign://personalize?v=1&m=https%3A%2F%2Fa.b&a=0123456789abcdef0123456789abcdef&s=short&k=\(String(repeating: "b", count: 43))",
            "activation secret"
        ),
        (
            "xign://personalize?v=1&m=https%3A%2F%2Fa.b&a=0123456789abcdef0123456789abcdef&s=\(String(repeating: "A", count: 43))",
            "fingerprint"
        ),
        ("xign://personalize?v=1&v=1&m=x", "appears twice"),
        (
            "xign://personalize?v=1&m=ftp%3A%2F%2Fa.b&a=0123456789abcdef0123456789abcdef&s=\(String(repeating: "A", count: 43))&k=\(String(repeating: "b", count: 43))",
            "https://"
        ),
        ("xign://personalize?v=1&m=%ZZ&a=0", "badly encoded"),
        ("xign://personalize?v=1 &m=x", "spaces"),
        ("xign://personalize?" + String(repeating: "x", count: 2000), "longer than 1024"),
        ("xign://personalize?v=1&novalue", "is not key=value"),
    ])
    func malformedPayloadsAreRefusedWithAReason(input: String, reason: String) {
        do {
            _ = try PersonalizationPayload(parsing: input)
            Issue.record("accepted \(input)")
        } catch {
            #expect("\(error)".contains(reason), "\(error)")
            #expect("\(error)".contains("activation mail"), "the message says what to do next")
        }
    }

    @Test func mailHeaderIsPreferredAndBodyLinkIsTheFallback() throws {
        let withHeader = "From: m\r\nX-Xign-Personalization: \(payload.deepLink)\r\nSubject: s\r\n\r\nbody\r\n"
        #expect(try PersonalizationPayload(parsingMail: withHeader) == payload)
        let bodyOnly = "From: m\r\n\r\nHello\r\n    \(payload.deepLink)\r\n"
        #expect(try PersonalizationPayload(parsingMail: bodyOnly) == payload)
        #expect(throws: PersonalizationPayload.ParseError.self) {
            try PersonalizationPayload(parsingMail: "From: m\r\n\r\nnothing here\r\n")
        }
    }
}

@Suite struct ManagerURLTests {
    @Test func parsesAndNormalizes() throws {
        let url = try ManagerURL("HTTPS://IDM.Example.org:8443/base/")
        #expect(url.description == "https://idm.example.org:8443/base")
        #expect(url.endpoint("/v1/registrations") == "https://idm.example.org:8443/base/v1/registrations")
    }

    @Test(arguments: [
        "idm.example.org", "ftp://x", "https://", "https://a@b", "https://a:0", "https://a:99999", "https://a/?q",
        "https://a/#f",
        "https://a b", "https://a/../b", "https://[::1", "https://a_b",
    ])
    func refusesMalformed(_ text: String) {
        #expect(throws: ManagerURL.ParseError.self) { try ManagerURL(text) }
    }

    // The three examples of the Nevis rule: scheme, host and port from the override, the path from the base.
    @Test func nevisOverrideRule() throws {
        #expect(
            try ManagerURL("https://server/path").overriding(with: ManagerURL("https://other.server")).description
                == "https://other.server/path")
        #expect(
            try ManagerURL("https://server:443/path").overriding(with: ManagerURL("https://other.server/path"))
                .description
                == "https://other.server/path")
        #expect(
            try ManagerURL("https://server/path").overriding(with: ManagerURL("http://other.server:80/otherpath"))
                .description
                == "http://other.server:80/path")
    }

    @Test func plainHTTPOnlyToLoopback() throws {
        for loopback in ["http://127.0.0.1:8440", "http://127.1.2.3", "http://localhost:1", "http://[::1]:8"] {
            #expect(throws: Never.self) { try ManagerURL(loopback).checkTransportPolicy() }
        }
        for remote in ["http://10.0.0.1", "http://example.org", "http://127.0.0.1.example.org", "http://[::2]"] {
            #expect(throws: ManagerURL.ParseError.self) { try ManagerURL(remote).checkTransportPolicy() }
        }
        #expect(throws: Never.self) { try ManagerURL("https://example.org").checkTransportPolicy() }
    }
}

@Suite struct ConfirmationPayloadTests {
    static let id = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

    @Test func theQRCodesLinkOpensThePageAndNamesTheConfirmation() throws {
        let manager = try ManagerURL("https://idm.example.com:8443/xign")
        let link = ConfirmationPayload.link(to: Self.id, at: manager)
        #expect(
            link == "HTTPS://IDM.EXAMPLE.COM:8443/xign/C#" + Self.id,
            "scheme and host in upper case; a path keeps its case")
        for text in [
            link, "https://idm.example.com/c#" + Self.id.lowercased(), "XIGN://C/" + Self.id,
            "  http://localhost:8440/C#\(Self.id)\n",
        ] {
            #expect(ConfirmationPayload.confirmationId(in: text) == Self.id, "\(text)")
        }
        for text in [
            "https://idm.example.com/x#" + Self.id, "ftp://idm.example.com/c#" + Self.id,
            "https://idm.example.com/c#" + Self.id.dropLast(),
            "XIGN://C/1BCDEFGHIJKLMNOPQRSTUVWXYZ",
        ] {
            #expect(ConfirmationPayload.confirmationId(in: text) == nil, "\(text)")
        }
    }

    /// `qr=text` names the account page of the manager that made the link, path prefix included.
    @Test func theAccountPageIsTheManagersOwn() {
        #expect(
            ConfirmationPayload.accountPage(of: "https://idm.example.com:8443/xign/c#" + Self.id)
                == "https://idm.example.com:8443/xign/account")
        #expect(
            ConfirmationPayload.accountPage(of: " http://127.0.0.1:8440/C#\(Self.id)\n")
                == "http://127.0.0.1:8440/account")
        for text in [
            "XIGN://C/" + Self.id, "https://idm.example.com/x#" + Self.id, "https://idm.example.com/c#short", "",
        ] {
            #expect(ConfirmationPayload.accountPage(of: text) == nil, "\(text)")
        }
    }
}

@Suite struct ManagerURLOriginTests {
    @Test func theOriginIsWhatABrowserWritesIntoClientData() throws {
        #expect(try ManagerURL("https://IDM.example.org:443/xign").origin == "https://idm.example.org")
        #expect(try ManagerURL("https://idm.example.org:8443").origin == "https://idm.example.org:8443")
        #expect(try ManagerURL("http://localhost:80").origin == "http://localhost")
        #expect(try ManagerURL("http://localhost:8440").origin == "http://localhost:8440")
    }
}
