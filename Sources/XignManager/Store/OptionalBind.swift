/// Lets a bound `Optional` be told from its wrapped value without knowing the wrapped type; both database bindings
/// bind nil as NULL through it.
protocol OptionalBind {
    var wrapped: (any Encodable)? { get }
}

extension Optional: OptionalBind where Wrapped: Encodable {
    var wrapped: (any Encodable)? { self }
}
