import NIOCore
import PushRelayProtocol
import Testing

@Suite struct FrameTests {
    @Test func headerIsTwelveBigEndianBytes() {
        var buffer = ByteBuffer()
        FrameHeader(length: 0x0102_0304, version: 1, flags: .zstd, kind: .send, requestID: 0x0A0B_0C0D).write(
            to: &buffer
        )
        #expect(Array(buffer.readableBytesView) == [1, 2, 3, 4, 1, 1, 0x00, 0x20, 0x0A, 0x0B, 0x0C, 0x0D])
        #expect(FrameHeader.peek(buffer)?.kind == .send)
    }
}
