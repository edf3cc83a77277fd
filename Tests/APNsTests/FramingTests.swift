import NIOCore
import Testing

@testable import APNs

@Suite("HTTP/2 framing")
struct FramingTests {
    @Test func framesSplitAcrossReadsAtAnyBoundaryAreReassembled() throws {
        var stream = ByteBuffer()
        for index in 0..<1000 {
            var payload = ByteBuffer()
            payload.writeInteger(UInt64(index))
            stream.writeHTTP2Frame(type: .ping, streamID: 0, payload: payload)
            stream.writeHTTP2Frame(type: .data, flags: HTTP2FrameFlag.endStream, streamID: 1, payload: ByteBuffer())
        }
        for chunkSize in [1, 7, 17, 4096] {
            var reader = HTTP2FrameReader()
            var input = stream
            var pings: [UInt64] = []
            var dataFrames = 0
            while input.readableBytes > 0 {
                reader.append(input.readSlice(length: min(chunkSize, input.readableBytes))!)
                while let frame = try reader.next() {
                    if frame.type == HTTP2FrameType.ping.rawValue {
                        pings.append(frame.payload.getInteger(at: frame.payload.readerIndex, as: UInt64.self)!)
                    } else {
                        #expect(frame.type == HTTP2FrameType.data.rawValue && frame.has(HTTP2FrameFlag.endStream))
                        dataFrames += 1
                    }
                }
            }
            #expect(pings == (0..<1000).map(UInt64.init))
            #expect(dataFrames == 1000)
        }
    }

    @Test func oversizedFramesAreAConnectionError() {
        var reader = HTTP2FrameReader()
        var header = ByteBuffer()
        header.writeHTTP2FrameHeader(length: 16_385, type: .data, flags: 0, streamID: 1)
        reader.append(header)
        #expect(throws: HTTP2ConnectionError.self) { try reader.next() }
    }

    @Test func paddingIsStripped() throws {
        var payload = ByteBuffer()
        payload.writeInteger(UInt8(3))
        payload.writeString("body")
        payload.writeBytes([0, 0, 0])
        try payload.stripHTTP2Padding(flags: HTTP2FrameFlag.padded, hasPriority: false)
        #expect(payload.readString(length: payload.readableBytes) == "body")
        var bad = ByteBuffer(bytes: [9, 1, 2])
        #expect(throws: HTTP2ConnectionError.self) {
            try bad.stripHTTP2Padding(flags: HTTP2FrameFlag.padded, hasPriority: false)
        }
    }
}
