/// The wire shape of every request message: each field it declares (Protocol/pushrelay.proto) with its wire type,
/// once unless it is repeated, and each repeated field's count limit (Protocol/README.md, "Field rules").
extension Pushrelay_V1_Hello {
    /// Every field once.
    public static func wireShape(limits: ProtocolLimits) -> WireShape {
        WireShape(
            "hello",
            [
                1: .once("min_version", .varint), 2: .once("max_version", .varint), 3: .once("tenant"),
                4: .once("credential"),
                5: .once("client_name"), 6: .once("accept_zstd", .varint),
            ])
    }
}

extension Pushrelay_V1_Ping {
    /// Every field once.
    public static func wireShape(limits: ProtocolLimits) -> WireShape {
        WireShape("ping", [1: .once("nonce", .varint)])
    }
}

extension Pushrelay_V1_Goodbye {
    /// Every field once.
    public static func wireShape(limits: ProtocolLimits) -> WireShape {
        WireShape("goodbye", [1: .once("reason")])
    }
}

extension Pushrelay_V1_RegisterDevice {
    /// `topics` at most ``FieldRules/maximumListCount`` times, every other field once.
    public static func wireShape(limits: ProtocolLimits) -> WireShape {
        WireShape(
            "register_device",
            [
                1: .once("user_id"), 2: .once("token"), 3: .once("platform"), 4: .once("environment", .varint),
                5: .once("device_id"), 6: .once("app_version"), 7: .once("locale"), 8: .once("time_zone"),
                9: .many("topics", FieldRules.maximumListCount), 10: .once("provider"),
            ])
    }
}

extension Pushrelay_V1_UnregisterDevice {
    /// Every field once.
    public static func wireShape(limits: ProtocolLimits) -> WireShape {
        WireShape("unregister_device", [1: .once("token"), 2: .once("user_id"), 3: .once("platform")])
    }
}

extension Pushrelay_V1_ListDevices {
    /// Every field once.
    public static func wireShape(limits: ProtocolLimits) -> WireShape {
        WireShape("list_devices", [1: .once("user_id"), 2: .once("limit", .varint), 3: .once("cursor")])
    }
}

extension Pushrelay_V1_Send {
    /// `user_ids`, `tokens` and `exclude_user_ids` at most `max_recipients` times each (`TOO_MANY_RECIPIENTS`; the
    /// sum of the first two is checked after decoding), each list of the alert and `template_values` at most
    /// ``FieldRules/maximumListCount`` times, every other field once, in the nested messages too.
    public static func wireShape(limits: ProtocolLimits) -> WireShape {
        let recipients = limits.maxRecipients
        let list = FieldRules.maximumListCount
        let alert = WireShape(
            [
                1: .once("title"), 2: .once("subtitle"), 3: .once("body"), 4: .once("launch_image"),
                5: .once("title_loc_key"), 6: .many("title_loc_args", list), 7: .once("subtitle_loc_key"),
                8: .many("subtitle_loc_args", list), 9: .once("loc_key"), 10: .many("loc_args", list),
            ])
        return WireShape(
            "send",
            [
                1: .once("notification_type"),
                2: .many("user_ids", recipients, code: .tooManyRecipients),
                3: .many("tokens", recipients, WireShape([1: .once("token")]), code: .tooManyRecipients),
                4: .once("topic"),
                5: .many("exclude_user_ids", recipients, code: .tooManyRecipients),
                6: .once("idempotency_key"), 7: .once("alert", alert), 8: .once("badge", .varint), 9: .once("sound"),
                10: .once("thread_id"), 11: .once("category"), 12: .once("content_available", .varint),
                13: .once("mutable_content", .varint), 14: .once("interruption_level"),
                15: .once("relevance_score", .fixed64),
                16: .once("custom_json"),
                // A map is a repeated field of entries.
                17: .many("template_values", list, WireShape([1: .once("key"), 2: .once("value")])),
                18: .once("collapse_id"), 19: .once("expiration", .varint), 20: .once("priority", .varint),
                21: .once("wait", .varint),
                22: .once("scope"), 23: .once("send_at_ms", .varint), 24: .once("send_at_local"),
            ])
    }
}

extension Pushrelay_V1_JobStatus {
    /// Every field once.
    public static func wireShape(limits: ProtocolLimits) -> WireShape {
        WireShape("job_status", [1: .once("job_id")])
    }
}

extension Pushrelay_V1_CancelJob {
    /// Every field once.
    public static func wireShape(limits: ProtocolLimits) -> WireShape {
        WireShape("cancel_job", [1: .once("job_id")])
    }
}

extension Pushrelay_V1_ListNotificationTypes {
    /// No fields.
    public static func wireShape(limits: ProtocolLimits) -> WireShape {
        WireShape("list_notification_types", [:])
    }
}

extension Pushrelay_V1_QueryDeliveries {
    /// Every field once.
    public static func wireShape(limits: ProtocolLimits) -> WireShape {
        WireShape(
            "query_deliveries",
            [
                1: .once("job_id"), 2: .once("user_id"), 3: .once("token"), 4: .once("from_ms", .varint),
                5: .once("to_ms", .varint),
                6: .once("limit", .varint), 7: .once("cursor"),
            ])
    }
}

extension Pushrelay_V1_SetPreferences {
    /// `preferences` at most ``FieldRules/maximumListCount`` times, every other field once.
    public static func wireShape(limits: ProtocolLimits) -> WireShape {
        let preference = WireShape([
            1: .once("notification_type"), 2: .once("enabled", .varint), 3: .once("mandatory", .varint),
        ])
        return WireShape(
            "set_preferences",
            [1: .once("user_id"), 2: .many("preferences", FieldRules.maximumListCount, preference)])
    }
}

extension Pushrelay_V1_GetPreferences {
    /// Every field once.
    public static func wireShape(limits: ProtocolLimits) -> WireShape {
        WireShape("get_preferences", [1: .once("user_id")])
    }
}

extension Pushrelay_V1_SetMute {
    /// Every field once.
    public static func wireShape(limits: ProtocolLimits) -> WireShape {
        WireShape(
            "set_mute", [1: .once("user_id"), 2: .once("thread_id"), 3: .once("scope"), 4: .once("until_ms", .varint)])
    }
}

extension Pushrelay_V1_ClearMute {
    /// Every field once.
    public static func wireShape(limits: ProtocolLimits) -> WireShape {
        WireShape("clear_mute", [1: .once("user_id"), 2: .once("thread_id"), 3: .once("scope")])
    }
}

extension Pushrelay_V1_ListMutes {
    /// Every field once.
    public static func wireShape(limits: ProtocolLimits) -> WireShape {
        WireShape("list_mutes", [1: .once("user_id")])
    }
}

extension Pushrelay_V1_SetPresence {
    /// Every field once.
    public static func wireShape(limits: ProtocolLimits) -> WireShape {
        WireShape("set_presence", [1: .once("user_id"), 2: .once("thread_id"), 3: .once("seconds", .varint)])
    }
}

extension Pushrelay_V1_SubscribeResults {
    /// Every field once.
    public static func wireShape(limits: ProtocolLimits) -> WireShape {
        WireShape("subscribe_results", [1: .once("receipts", .varint)])
    }
}

extension Pushrelay_V1_UnsubscribeResults {
    /// Every field once.
    public static func wireShape(limits: ProtocolLimits) -> WireShape {
        WireShape("unsubscribe_results", [1: .once("subscription_request_id", .varint)])
    }
}
