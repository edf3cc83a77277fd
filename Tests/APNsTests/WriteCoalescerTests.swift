import NIOCore
import NIOEmbedded
import Synchronization
import Testing

@testable import APNsSimulator

/// The simulators' ``WriteCoalescer``: a flush's writes reach TLS as one buffer (one record), at most 16 KiB each.
@Suite struct WriteCoalescerTests {
    @Test func aFlushsWritesGoDownAsOneBufferAndTheirPromisesComplete() throws {
        let channel = EmbeddedChannel(handler: WriteCoalescer())
        let first = channel.eventLoop.makePromise(of: Void.self)
        let second = channel.eventLoop.makePromise(of: Void.self)
        channel.write(ByteBuffer(string: "HEADERS"), promise: first)
        channel.write(ByteBuffer(string: "DATA header"), promise: nil)
        channel.write(ByteBuffer(string: "DATA payload"), promise: second)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        channel.flush()
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "HEADERSDATA headerDATA payload"))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        let completed = Mutex(0)
        for promise in [first, second] { promise.futureResult.whenSuccess { completed.withLock { $0 += 1 } } }
        #expect(completed.withLock { $0 } == 2)
        #expect(try channel.finish().isClean)
    }

    @Test func writesBeyondARecordsWorthGoDownWithoutWaitingForTheFlush() throws {
        let channel = EmbeddedChannel(handler: WriteCoalescer())
        let answer = ByteBuffer(repeating: 0x41, count: 1_000)
        for _ in 0..<17 { channel.write(answer, promise: nil) }
        channel.write(answer, promise: nil)
        channel.flush()
        // The first 17 went down as one buffer once they passed 16 KiB; the flush sent the last on its own.
        #expect(try channel.readOutbound(as: ByteBuffer.self)?.readableBytes == 17_000)
        #expect(try channel.readOutbound(as: ByteBuffer.self)?.readableBytes == 1_000)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        #expect(try channel.finish().isClean)
    }
}
