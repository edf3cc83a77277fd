import NIOCore
import PushRelayProtocol
import SwiftProtobuf
import Testing

/// `WireShape`: every repeated field of every request has a count limit, checked on the wire bytes before the body
/// is decoded; a field that is not repeated appears at most once (Protocol/README.md, "Field rules").
@Suite struct WireShapeTests {
    /// Every request message with its shape under the default limits.
    static let requests: [(any FramedRequest.Type, WireShape)] = [
        (Pushrelay_V1_Hello.self, Pushrelay_V1_Hello.wireShape(limits: ProtocolLimits())),
        (Pushrelay_V1_Ping.self, Pushrelay_V1_Ping.wireShape(limits: ProtocolLimits())),
        (Pushrelay_V1_Goodbye.self, Pushrelay_V1_Goodbye.wireShape(limits: ProtocolLimits())),
        (Pushrelay_V1_RegisterDevice.self, Pushrelay_V1_RegisterDevice.wireShape(limits: ProtocolLimits())),
        (Pushrelay_V1_UnregisterDevice.self, Pushrelay_V1_UnregisterDevice.wireShape(limits: ProtocolLimits())),
        (Pushrelay_V1_ListDevices.self, Pushrelay_V1_ListDevices.wireShape(limits: ProtocolLimits())),
        (Pushrelay_V1_Send.self, Pushrelay_V1_Send.wireShape(limits: ProtocolLimits())),
        (Pushrelay_V1_JobStatus.self, Pushrelay_V1_JobStatus.wireShape(limits: ProtocolLimits())),
        (Pushrelay_V1_CancelJob.self, Pushrelay_V1_CancelJob.wireShape(limits: ProtocolLimits())),
        (
            Pushrelay_V1_ListNotificationTypes.self,
            Pushrelay_V1_ListNotificationTypes.wireShape(limits: ProtocolLimits())
        ),
        (Pushrelay_V1_QueryDeliveries.self, Pushrelay_V1_QueryDeliveries.wireShape(limits: ProtocolLimits())),
        (Pushrelay_V1_SetPreferences.self, Pushrelay_V1_SetPreferences.wireShape(limits: ProtocolLimits())),
        (Pushrelay_V1_GetPreferences.self, Pushrelay_V1_GetPreferences.wireShape(limits: ProtocolLimits())),
        (Pushrelay_V1_SetMute.self, Pushrelay_V1_SetMute.wireShape(limits: ProtocolLimits())),
        (Pushrelay_V1_ClearMute.self, Pushrelay_V1_ClearMute.wireShape(limits: ProtocolLimits())),
        (Pushrelay_V1_ListMutes.self, Pushrelay_V1_ListMutes.wireShape(limits: ProtocolLimits())),
        (Pushrelay_V1_SetPresence.self, Pushrelay_V1_SetPresence.wireShape(limits: ProtocolLimits())),
        (Pushrelay_V1_SubscribeResults.self, Pushrelay_V1_SubscribeResults.wireShape(limits: ProtocolLimits())),
        (Pushrelay_V1_UnsubscribeResults.self, Pushrelay_V1_UnsubscribeResults.wireShape(limits: ProtocolLimits())),
    ]

    /// The tag of field `number` with `wireType`, as a varint.
    static func tag(_ number: Int, _ wireType: UInt64) -> [UInt8] {
        varint(UInt64(number) << 3 | wireType)
    }

    static func varint(_ value: UInt64) -> [UInt8] {
        var value = value
        var bytes: [UInt8] = []
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        return bytes + [UInt8(value)]
    }

    /// A field of `number` with a small non-default value of `wireType`.
    static func field(_ number: Int, _ wireType: UInt64) -> [UInt8] {
        switch wireType {
        case 0: tag(number, 0) + [1]
        case 1: tag(number, 1) + Array(repeating: 1, count: 8)
        case 2: tag(number, 2) + [0]
        default: tag(number, 5) + Array(repeating: 1, count: 4)
        }
    }

    /// How `M` declares field `number` as protobuf decodes it: its wire type and whether it is repeated (two
    /// different occurrences both kept), or `nil` when it does not declare it.
    static func declared<M: SwiftProtobuf.Message>(
        _ type: M.Type, _ number: Int
    ) -> (wireType: UInt64, repeated: Bool)? {
        for wireType: UInt64 in [0, 1, 2, 5] {
            let once = field(number, wireType)
            guard let message = try? M(serializedBytes: once), message.unknownFields.data.isEmpty else { continue }
            // A second value unlike the first (a map keeps one entry per key): the string "\nA", or a message whose
            // field 1 is "A".
            let other = wireType == 2 ? tag(number, 2) + [3, 0x0A, 1, 0x41] : once
            let twice = (try? M(serializedBytes: once + other)).flatMap { try? $0.serializedBytes() as [UInt8] }
            return (wireType, occurrences(of: number, in: twice ?? []) == 2)
        }
        return nil
    }

    /// How many times field `number` appears at the top level of `bytes`.
    static func occurrences(of number: Int, in bytes: [UInt8]) -> Int {
        var index = 0
        var count = 0
        func varint() -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte < 0x80 { break }
                shift += 7
            }
            return value
        }
        while index < bytes.count {
            let tag = varint()
            if Int(tag >> 3) == number { count += 1 }
            switch tag & 7 {
            case 0: _ = varint()
            case 1: index += 8
            case 2: index += Int(varint())
            default: index += 4
            }
        }
        return count
    }

    /// What differs between `shape` and how `M` declares its fields 1 to 40, nested messages included.
    static func differences<M: SwiftProtobuf.Message>(_ type: M.Type, _ shape: WireShape) -> [String] {
        var problems: [String] = []
        for number in 1...40 {
            let actual = declared(M.self, number)
            let field = shape.fields[number]
            switch (actual, field) {
            case (nil, nil):
                continue
            case (let actual?, let field?):
                if actual.wireType != field.wireType.rawValue { problems.append("\(field.name) has another wire type") }
                if actual.repeated != (field.limit > 1) {
                    problems.append("\(field.name) is \(actual.repeated ? "" : "not ")repeated")
                }
            default:
                problems.append("field \(number) is \(actual == nil ? "not " : "")declared")
            }
        }
        return problems
    }

    @Test func everyRequestShapeHasExactlyItsMessagesFieldsWithTheirWireTypesAndRepetition() {
        for (type, shape) in Self.requests {
            #expect(Self.differences(type, shape) == [], "\(type.protoMessageName)")
        }
        let send = Pushrelay_V1_Send.wireShape(limits: ProtocolLimits())
        #expect(Self.differences(Pushrelay_V1_Alert.self, send.fields[7]!.message!) == [])
        #expect(Self.differences(Pushrelay_V1_TokenTarget.self, send.fields[3]!.message!) == [])
        let preferences = Pushrelay_V1_SetPreferences.wireShape(limits: ProtocolLimits())
        #expect(Self.differences(Pushrelay_V1_TypePreference.self, preferences.fields[2]!.message!) == [])
    }

    /// What `shape` makes of `body`: `nil` when it passes, else the error's code and field.
    static func verdict(_ shape: WireShape, _ body: [UInt8]) -> Verdict {
        do throws(ProtocolError) {
            try shape.check(ByteBuffer(bytes: body), messageName: "test")
            return .accepted
        } catch {
            return .refused(error.code, field: error.field)
        }
    }

    static func bytes(_ message: some SwiftProtobuf.Message) -> [UInt8] {
        (try? message.serializedBytes()) ?? []
    }

    @Test func eachRepeatedFieldTakesItsLimitAndIsRefusedOneBeyondWithItsField() {
        let limits = ProtocolLimits(maxRecipients: 50)
        let send = Pushrelay_V1_Send.wireShape(limits: limits)
        let list = FieldRules.maximumListCount
        func ids(_ count: Int) -> [String] { (0..<count).map { "id-\($0)" } }
        let sends: [(String, Int, (Int) -> Pushrelay_V1_Send, Pushrelay_V1_ErrorCode)] = [
            (
                "send.user_ids", 50,
                { count in FieldRulesTests.with(Pushrelay_V1_Send()) { $0.userIds = ids(count) } }, .tooManyRecipients
            ),
            (
                "send.tokens", 50,
                { count in
                    FieldRulesTests.with(Pushrelay_V1_Send()) {
                        $0.tokens = ids(count).map { id in
                            FieldRulesTests.with(Pushrelay_V1_TokenTarget()) { $0.token = id }
                        }
                    }
                }, .tooManyRecipients
            ),
            (
                "send.exclude_user_ids", 50,
                { count in FieldRulesTests.with(Pushrelay_V1_Send()) { $0.excludeUserIds = ids(count) } },
                .tooManyRecipients
            ),
            (
                "send.alert.title_loc_args", list,
                { count in FieldRulesTests.with(Pushrelay_V1_Send()) { $0.alert.titleLocArgs = ids(count) } },
                .invalidArgument
            ),
            (
                "send.alert.subtitle_loc_args", list,
                { count in FieldRulesTests.with(Pushrelay_V1_Send()) { $0.alert.subtitleLocArgs = ids(count) } },
                .invalidArgument
            ),
            (
                "send.alert.loc_args", list,
                { count in FieldRulesTests.with(Pushrelay_V1_Send()) { $0.alert.locArgs = ids(count) } },
                .invalidArgument
            ),
            (
                "send.template_values", list,
                { count in
                    FieldRulesTests.with(Pushrelay_V1_Send()) {
                        $0.templateValues = Dictionary(uniqueKeysWithValues: ids(count).map { ($0, "v") })
                    }
                },
                .invalidArgument
            ),
        ]
        for (field, limit, make, code) in sends {
            #expect(Self.verdict(send, Self.bytes(make(limit))) == .accepted, "\(field) \(code.name)")
            #expect(
                Self.verdict(send, Self.bytes(make(limit + 1))) == .refused(code, field: field), "\(field) \(code.name)"
            )
        }
        let register = Pushrelay_V1_RegisterDevice.wireShape(limits: limits)
        for (count, verdict) in [(list, Verdict.accepted), (list + 1, .invalid("register_device.topics"))] {
            let message = FieldRulesTests.with(Pushrelay_V1_RegisterDevice()) { $0.topics = ids(count) }
            #expect(Self.verdict(register, Self.bytes(message)) == verdict)
        }
        let preferences = Pushrelay_V1_SetPreferences.wireShape(limits: limits)
        for (count, verdict) in [(list, Verdict.accepted), (list + 1, .invalid("set_preferences.preferences"))] {
            let message = FieldRulesTests.with(Pushrelay_V1_SetPreferences()) {
                $0.preferences = ids(count).map { id in
                    FieldRulesTests.with(Pushrelay_V1_TypePreference()) { $0.notificationType = id }
                }
            }
            #expect(Self.verdict(preferences, Self.bytes(message)) == verdict)
        }
    }

    @Test func aFieldThatIsNotRepeatedAppearsOnceAtEveryDepth() {
        let send = Pushrelay_V1_Send.wireShape(limits: ProtocolLimits())
        let title = Self.tag(1, 2) + [1, 0x41]
        let alert = Self.tag(7, 2) + [UInt8(2 * title.count)] + title + title
        #expect(Self.verdict(send, alert) == .invalid("send.alert.title"))
        #expect(Self.verdict(send, Self.field(7, 2) + Self.field(7, 2)) == .invalid("send.alert"))
        #expect(Self.verdict(send, Self.field(21, 0) + Self.field(21, 0)) == .invalid("send.wait"))
        let key = Self.tag(1, 2) + [1, 0x6B]
        let entry = Self.tag(17, 2) + [UInt8(2 * key.count)] + key + key
        #expect(Self.verdict(send, entry) == .invalid("send.template_values.key"))
        let ping = Pushrelay_V1_Ping.wireShape(limits: ProtocolLimits())
        #expect(Self.verdict(ping, Self.field(1, 0) + Self.field(1, 0)) == .invalid("ping.nonce"))
    }

    @Test func undeclaredFieldsWrongWireTypesGroupsAndCutBytesAreInvalidBody() {
        let send = Pushrelay_V1_Send.wireShape(limits: ProtocolLimits())
        let undeclared = Self.field(99, 0)
        let many = Array(repeating: undeclared, count: Frame.maximumUnknownFields).flatMap { $0 }
        #expect(Self.verdict(send, many) == .accepted)
        #expect(Self.verdict(send, many + undeclared) == .refused(.invalidBody, field: ""))
        // Undeclared fields are counted at every depth together.
        let inAlert = Self.tag(7, 2) + Self.varint(UInt64(undeclared.count)) + undeclared
        #expect(Self.verdict(send, many + inAlert) == .refused(.invalidBody, field: ""))
        // And their distinct numbers: 64 at the top level pass, one more in the alert does not.
        let distinct = (100..<164).flatMap { Self.field($0, 0) }
        #expect(Self.verdict(send, distinct) == .accepted)
        let another = Self.field(164, 0)
        let anotherInAlert = Self.tag(7, 2) + Self.varint(UInt64(another.count)) + another
        #expect(Self.verdict(send, distinct + anotherInAlert) == .refused(.invalidBody, field: ""))
        // A declared field of another wire type is named.
        #expect(Self.verdict(send, Self.field(2, 0)) == .refused(.invalidBody, field: "send.user_ids"))
        #expect(Self.verdict(send, Self.tag(7, 5) + [0, 0, 0, 0]) == .refused(.invalidBody, field: "send.alert"))
        let titleAsVarint = Self.tag(7, 2) + [2] + Self.field(1, 0)
        #expect(Self.verdict(send, titleAsVarint) == .refused(.invalidBody, field: "send.alert.title"))
        for body: [UInt8] in [
            Self.tag(99, 3) + Self.tag(99, 4),  // a group
            Self.tag(1, 2) + [5, 0x41],  // a string cut short
            [0x80],  // a tag cut short
            Self.tag(1, 6),  // a wire type that does not exist
            [0x00],  // field number 0
        ] {
            #expect(Self.verdict(send, body) == .refused(.invalidBody, field: ""), "\(body)")
        }
    }

    /// A SEND to one user whose alert holds `count` empty `loc_args` (two bytes each), then `tail`.
    static func locArgsBomb(_ count: Int, tail: [UInt8] = []) -> [UInt8] {
        let head = bytes(
            FieldRulesTests.with(Pushrelay_V1_Send()) {
                $0.notificationType = "message"
                $0.userIds = ["ada"]
            })
        // loc_args (field 10 of Alert) as empty strings.
        var args: [UInt8] = []
        args.reserveCapacity(2 * count)
        for _ in 0..<count { args += [0x52, 0] }
        return head + tag(7, 2) + varint(UInt64(args.count)) + args + tail
    }

    @Test func twoMillionEmptyLocArgsAreRefusedByTheirCountBeforeTheBodyIsDecoded() throws {
        // 4 MB of loc_args, then a field cut short: decoding would find the body invalid; the count check refuses
        // at the 257th entry without reading the rest.
        let body = Self.locArgsBomb(2_000_000, tail: Self.tag(1, 2) + [0xFF])
        let frame = Frame(kind: .send, requestID: 1, body: ByteBuffer(bytes: body))
        let error = #expect(throws: ProtocolError.self) {
            try frame.request(Pushrelay_V1_Send.self, limits: ProtocolLimits(), nowMilliseconds: FieldRulesTests.now)
        }
        #expect(error?.code == .invalidArgument && error?.field == "send.alert.loc_args")
        #expect(error?.message.contains("at most 256") == true)
        // The same bytes compressed are refused before they are decompressed: a few hundred bytes may not inflate to
        // megabytes.
        let compressed = Zstd.compress(ByteBuffer(bytes: Self.locArgsBomb(2_000_000)), allocator: ByteBufferAllocator())
        #expect(compressed.readableBytes < 1_000)
        var stream = ByteBuffer()
        FrameHeader(
            length: UInt32(compressed.readableBytes), version: 1, flags: .zstd, kind: .send, requestID: 3
        ).write(to: &stream)
        stream.writeImmutableBuffer(compressed)
        var parser = FrameParser(limits: ProtocolLimits())
        guard case .refused(3, .send, let refusal) = parser.next(from: &stream) else {
            Issue.record("the compressed bomb was not refused")
            return
        }
        #expect(refusal.code == .decompressedTooLarge)
        #expect(refusal.message.contains("more than 256 times"))
    }
}
