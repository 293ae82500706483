import FoundationEssentials
import Testing
import XignProtocol

@Suite struct PinPolicyTests {
    let policy = PinPolicyMessage(
        minLength: 5, maxLength: 8, digitsOnly: true, maxSequenceLength: 3, maxSimilarDigits: 2, blacklist: ["24682"])

    @Test(arguments: [
        ("", PinValidationResult.empty), ("1357", .tooShort), ("135792468", .tooLong), ("13a79", .onlyNumbers),
        ("24682", .blacklisted), ("91234", .sequence), ("98765", .sequence), ("19990", .similarDigits),
        ("12390", .valid), ("11922", .valid), ("24680", .valid),
    ])
    func codes(pin: String, expected: PinValidationResult) {
        #expect(policy.validate(pin) == expected)
    }

    @Test func aliasAndEmail() {
        let alias = AliasPolicyMessage(minLength: 2, maxLength: 4)
        #expect(alias.validate(" ") == .empty)
        #expect(alias.validate("a") == .tooShort)
        #expect(alias.validate("abcde") == .tooLong)
        #expect(alias.validate("abc") == .valid)
        #expect(EmailValidator.validate("") == .empty)
        #expect(EmailValidator.validate("a@b") == .invalid)
        #expect(EmailValidator.validate("a b@c.d") == .invalid)
        #expect(EmailValidator.validate("alice@example.org") == .valid)
        #expect(EmailValidator.validate("jürgen@example.org") == .valid)
        #expect(EmailValidator.validate("alice\u{202E}@example.org") == .invalid)
        #expect(EmailValidator.validate("alice\u{85}@example.org") == .invalid)
    }

    /// Lengths count Unicode scalars, as JSON Schema's maxLength does (docs/openapi.yaml): a decomposed "ö" is two.
    @Test func aliasLengthsCountScalarsAsTheSpecDoes() {
        let alias = AliasPolicyMessage(minLength: 1, maxLength: 4)
        #expect(alias.validate("Jörg") == .valid)
        #expect(alias.validate("Jo\u{308}rg") == .tooLong)
        #expect(TextAttributeValidator.validate(String(repeating: "ü", count: 128)) == .valid)
        #expect(TextAttributeValidator.validate(String(repeating: "u\u{308}", count: 65)) == .invalid)
    }

    /// A PIN must be typable on any login screen: a non-ASCII character is refused even where letters are allowed.
    @Test func aPINIsPrintableASCII() {
        let letters = PinPolicyMessage(
            minLength: 4, maxLength: 16, digitsOnly: false, maxSequenceLength: 3, maxSimilarDigits: 2, blacklist: [])
        #expect(letters.validate("Blue sky 7!") == .valid)
        #expect(letters.validate("Grüße 7") == .unsupportedCharacter)
        #expect(letters.validate("tab\there") == .unsupportedCharacter)
        #expect(policy.validate("2468\u{660}") == .onlyNumbers)
    }

    @Test func identifiersArePrintableASCIIWithoutSpaces() {
        #expect(IdentifierValidator.isValid("portal-1.example_org"))
        #expect(!IdentifierValidator.isValid(""))
        #expect(IdentifierValidator.isValid("", length: 0...64))
        #expect(!IdentifierValidator.isValid("a b"))
        #expect(!IdentifierValidator.isValid("\u{84}"))
        #expect(!IdentifierValidator.isValid(String(repeating: "a", count: 65)))
    }
}

@Suite struct ConfigFileTests {
    @Test func readsSectionsAndTypedValues() throws {
        let file = try ConfigFile(
            text: "# c\ntop = 1\n[lockout]\nbase_delay = 250ms\nmax = \"5m\"\nflag = yes\nlist = a, b,,c\n",
            source: "t.conf")
        #expect(try file.integer("top", in: 0...9) == 1)
        #expect(try file.milliseconds("lockout.base_delay", in: 0...1000) == 250)
        #expect(try file.milliseconds("lockout.max", in: 0...1_000_000) == 300_000)
        #expect(try file.bool("lockout.flag") == true)
        #expect(file.list("lockout.list") == ["a", "b", "c"])
    }

    @Test(arguments: [
        ("a = 1\na = 2\n", "t.conf:2: a is already set on line 1"),
        ("[x\n", "t.conf:1: a section header looks like [name]"),
        ("justtext\n", "t.conf:1: expected key = value"),
        ("b@d = 1\n", "t.conf:1: 'b@d' is not a valid key"),
    ])
    func errorsNameTheLine(text: String, message: String) {
        #expect(throws: ConfigFile.ParseError(description: message)) { try ConfigFile(text: text, source: "t.conf") }
    }

    @Test func badValuesAndUnknownKeysAreErrors() throws {
        let file = try ConfigFile(text: "n = 99\nd = soon\nb = maybe\ntypo = 1\n", source: "t.conf")
        #expect(throws: ConfigFile.ParseError.self) { try file.integer("n", in: 0...10) }
        #expect(throws: ConfigFile.ParseError.self) { try file.milliseconds("d", in: 0...10) }
        #expect(throws: ConfigFile.ParseError.self) { try file.bool("b") }
        #expect(throws: ConfigFile.ParseError(description: "t.conf:4: unknown setting 'typo'")) {
            try file.rejectUnknownKeys(["n", "d", "b"])
        }
    }
}

@Suite struct SignedRequestTests {
    @Test func canonicalMessageCoversMethodPathBodyAndChallenge() {
        let message = SignedRequest.canonicalMessage(
            method: "post", path: "/v1/x", body: Data("{}".utf8), challenge: "c1")
        // SHA-256("{}") = 44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a
        #expect(
            String(decoding: message, as: UTF8.self)
                == "xign-request-v1\nPOST\n/v1/x\nRBNvo1WzZ4oRRq0W9-hknpT7T8If536DEMBg9hyq_4o\nc1")
    }
}
