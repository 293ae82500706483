import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTPTypes
import XignProtocol

/// What is open per client address (connections, or a proxy's requests in flight), shared by one server.
final class ConnectionsPerAddress: Sendable {
    private let counts = NIOLockedValueBox<[String: Int]>([:])

    /// Counts one more for `address`; false (and nothing counted) when it already has `limit`.
    func admit(_ address: String, limit: Int) -> Bool {
        counts.withLockedValue { counts in
            let open = counts[address, default: 0]
            guard open < limit else { return false }
            counts[address] = open + 1
            return true
        }
    }

    func release(_ address: String) {
        counts.withLockedValue { counts in
            let open = counts[address, default: 1] - 1
            counts[address] = open > 0 ? open : nil
        }
    }
}

/// Refuses a connection whose address has too many open already, so one client cannot use up the file limit. A
/// trusted proxy carries many clients, so it has a cap of its own (`connections_per_proxy`); its clients are held to
/// `connections_per_address` by `ForwardedClientLimitMiddleware`, per request. A refused connection is not counted:
/// its request is answered 503 `busy` and it is closed, within `refusalTimeout` whether or not a request came. An
/// answer, not a closed connection, because a client reads a manager that closes as one it cannot reach, and a local
/// user who holds the cap must not send a laptop's logins offline (docs/security.md, H7).
final class ConnectionLimitHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias OutboundOut = HTTPResponsePart

    static let refusalTimeout: TimeAmount = .seconds(2)

    private let connections: ConnectionsPerAddress
    private let perAddress: Int, perProxy: Int
    private let trustedProxies: Set<String>
    private var admitted: String?
    /// Set while a refused connection waits for its request, to be answered and closed.
    private var refusal: Scheduled<Void>?

    init(_ connections: ConnectionsPerAddress, perAddress: Int, perProxy: Int, trustedProxies: [String]) {
        (self.connections, self.perAddress, self.perProxy, self.trustedProxies) = (
            connections, perAddress, perProxy, Set(trustedProxies)
        )
    }

    func handlerAdded(context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        admit(context: context)
    }

    func channelActive(context: ChannelHandlerContext) {
        admit(context: context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let refusal else { return context.fireChannelRead(data) }
        guard case .head = unwrapInboundIn(data) else { return }
        refusal.cancel()
        let body = ByteBuffer(bytes: Self.busyBody)
        var fields = HTTPFields()
        fields[.contentType] = "application/json"
        fields[.contentLength] = String(body.readableBytes)
        fields[.connection] = "close"
        fields[.retryAfter] = "1"
        context.write(
            wrapOutboundOut(.head(HTTPResponse(status: .serviceUnavailable, headerFields: fields))), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in context.close(promise: nil) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let admitted { connections.release(admitted) }
        admitted = nil
        refusal?.cancel()
        context.fireChannelInactive()
    }

    private func admit(context: ChannelHandlerContext) {
        guard admitted == nil, refusal == nil, let address = context.channel.remoteAddress?.ipAddress else { return }
        let isProxy = trustedProxies.contains(address)
        let key = isProxy ? address : AddressKey.key(for: address)
        if connections.admit(key, limit: isProxy ? perProxy : perAddress) {
            admitted = key
        } else {
            let channel = context.channel
            refusal = context.eventLoop.scheduleTask(in: Self.refusalTimeout) { channel.close(promise: nil) }
        }
    }

    private static let busyBody: [UInt8] = Array(
        (try? JSONEncoder().encode(
            ErrorBody(
                .init(
                    code: .busy,
                    message: "too many connections from your address are open at the manager; try again in a moment"
                )))) ?? Data())
}

/// Deadlines that a slow client cannot stretch: a new connection has `readTimeout` to send a request head, a request
/// from its head to its end has `readTimeout`, and a kept-alive connection has `idleTimeout` to start the next one.
/// Bytes trickled in do not reset them. While the manager works on a request (long polls included) none runs.
final class RequestDeadlineHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let readTimeout: TimeAmount
    private let idleTimeout: TimeAmount
    private var deadline: Scheduled<Void>?

    init(readTimeout: TimeAmount, idleTimeout: TimeAmount) {
        self.readTimeout = readTimeout
        self.idleTimeout = idleTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(readTimeout, context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        if deadline == nil { arm(readTimeout, context: context) }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head: arm(readTimeout, context: context)
        case .body: break
        case .end: disarm()
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { arm(idleTimeout, context: context) }
        context.write(data, promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        disarm()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) { disarm() }

    private func arm(_ timeout: TimeAmount, context: ChannelHandlerContext) {
        disarm()
        let channel = context.channel
        deadline = context.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
    }

    private func disarm() {
        deadline?.cancel()
        deadline = nil
    }
}
