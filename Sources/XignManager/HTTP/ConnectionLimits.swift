import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTPTypes

/// Open connections per client address, shared by every connection of one server.
final class ConnectionsPerAddress: Sendable {
    let limit: Int
    private let counts = NIOLockedValueBox<[String: Int]>([:])

    init(limit: Int) { self.limit = limit }

    /// Counts a new connection from `address`; false (and nothing counted) when it already has `limit`.
    func admit(_ address: String) -> Bool {
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

/// Closes a connection whose address has too many open already, so one client cannot use up the file limit.
final class ConnectionLimitHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart

    private let connections: ConnectionsPerAddress
    private var admitted: String?

    init(_ connections: ConnectionsPerAddress) { self.connections = connections }

    func handlerAdded(context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        admit(context: context)
    }

    func channelActive(context: ChannelHandlerContext) {
        admit(context: context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let admitted { connections.release(admitted) }
        admitted = nil
        context.fireChannelInactive()
    }

    private func admit(context: ChannelHandlerContext) {
        guard admitted == nil, let address = context.channel.remoteAddress?.ipAddress else { return }
        if connections.admit(address) { admitted = address } else { context.close(promise: nil) }
    }
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
