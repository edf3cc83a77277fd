public import SwiftProtobuf

/// A request message whose fields are checked once, at the boundary, before the relay acts on it.
///
/// The rules are the table in Protocol/README.md ("Field rules"); ``FieldRules`` holds their numbers. The counts of
/// the message's fields are checked first, on the body's bytes (``wireShape(limits:)``), and again, in the same
/// order, by ``validate(limits:nowMilliseconds:)``, so that a message built in memory gets the same first error.
public protocol ValidatedRequest: SwiftProtobuf.Message, IdentityNormalized {
    /// How many times each field may appear in a body (RequestShapes.swift), checked before the body is decoded.
    static func wireShape(limits: ProtocolLimits) -> WireShape

    /// Throws `INVALID_ARGUMENT` (or `TOO_MANY_RECIPIENTS`) naming the first field that breaks a rule.
    /// `nowMilliseconds` is the relay's clock, for rules relative to it.
    func validate(limits: ProtocolLimits, nowMilliseconds: Int64) throws(ProtocolError)
}

extension Frame {
    /// Checks the body's field counts against `M`'s ``ValidatedRequest/wireShape(limits:)``, then decodes it: the
    /// first field over its count, or `INVALID_BODY`. Its other field rules are not checked yet. The message keeps
    /// no field its type does not declare, at any depth (the wire shape bounded them and refused any declared field
    /// of another wire type): what the relay holds and stores of a request is what it will execute.
    public func decode<M: ValidatedRequest>(_ type: M.Type = M.self, limits: ProtocolLimits) throws(ProtocolError) -> M
    {
        try M.wireShape(limits: limits).check(body, messageName: M.protoMessageName)
        var options = BinaryDecodingOptions()
        options.discardUnknownFields = true
        return try parse(options: options)
    }

    /// Checks the body's field counts, decodes it as `M`, puts its ids in NFC (``IdentityNormalized``) and checks
    /// its fields: the first rule broken, or `INVALID_BODY`.
    public func request<M: ValidatedRequest>(
        _ type: M.Type = M.self,
        limits: ProtocolLimits,
        nowMilliseconds: Int64
    ) throws(ProtocolError) -> M {
        var message: M = try decode(limits: limits)
        message.normalizeIdentities()
        try message.validate(limits: limits, nowMilliseconds: nowMilliseconds)
        return message
    }
}

extension Pushrelay_V1_Hello: ValidatedRequest {
    /// Checks `client_name`; `tenant` and `credential` are checked by authentication, which refuses every value
    /// that is not a valid credential of that tenant with `AUTHENTICATION_FAILED`.
    public func validate(limits: ProtocolLimits, nowMilliseconds: Int64) throws(ProtocolError) {
        try FieldChecker("hello").id(clientName, "client_name", required: false)
    }
}

extension Pushrelay_V1_Ping: ValidatedRequest {
    /// Checks the fields of a `Ping` (Protocol/README.md, "Field rules").
    public func validate(limits: ProtocolLimits, nowMilliseconds: Int64) throws(ProtocolError) {}
}

extension Pushrelay_V1_Goodbye: ValidatedRequest {
    /// Checks the fields of a `Goodbye` (Protocol/README.md, "Field rules").
    public func validate(limits: ProtocolLimits, nowMilliseconds: Int64) throws(ProtocolError) {
        try FieldChecker("goodbye").id(reason, "reason", required: false)
    }
}

extension Pushrelay_V1_RegisterDevice: ValidatedRequest {
    /// Checks the fields of a `RegisterDevice` (Protocol/README.md, "Field rules").
    public func validate(limits: ProtocolLimits, nowMilliseconds: Int64) throws(ProtocolError) {
        let check = FieldChecker("register_device")
        try check.count(topics.count, "topics", maximum: FieldRules.maximumListCount)
        try check.id(userID, "user_id")
        let provider = PushProvider(wireName: self.provider)
        try check.require(
            provider.isWellFormed, "provider",
            "a provider is 1 to \(PushProvider.maximumNameBytes) bytes of a-z, 0-9 and _ (apns, fcm, webpush)")
        try check.token(token, "token", provider: provider)
        try check.id(platform, "platform", maximumBytes: 32)
        if provider == .apns {
            try check.require(
                environment == .production || environment == .sandbox, "environment",
                "environment is PRODUCTION or SANDBOX")
        }
        try check.id(deviceID, "device_id", required: false)
        try check.id(appVersion, "app_version", required: false, maximumBytes: 64)
        try check.id(locale, "locale", required: false, maximumBytes: 64)
        try check.timeZone(timeZone, "time_zone")
        try check.ids(topics, "topics")
    }
}

extension Pushrelay_V1_UnregisterDevice: ValidatedRequest {
    /// Checks the fields of a `UnregisterDevice` (Protocol/README.md, "Field rules").
    public func validate(limits: ProtocolLimits, nowMilliseconds: Int64) throws(ProtocolError) {
        let check = FieldChecker("unregister_device")
        if !token.isEmpty {
            try check.token(token, "token")
            try check.id(userID, "user_id", required: false)
            try check.id(platform, "platform", required: false, maximumBytes: 32)
        } else {
            try check.id(userID, "user_id")
            try check.id(platform, "platform", maximumBytes: 32)
        }
    }
}

extension Pushrelay_V1_ListDevices: ValidatedRequest {
    /// Checks the fields of a `ListDevices` (Protocol/README.md, "Field rules").
    public func validate(limits: ProtocolLimits, nowMilliseconds: Int64) throws(ProtocolError) {
        let check = FieldChecker("list_devices")
        try check.id(userID, "user_id")
        try check.number(limit, "limit", in: 0...FieldRules.maximumQueryLimit)
        try check.cursor(cursor, "cursor")
    }
}

extension Pushrelay_V1_Send: ValidatedRequest {
    /// Checks the fields of a `Send` (Protocol/README.md, "Field rules").
    public func validate(limits: ProtocolLimits, nowMilliseconds: Int64) throws(ProtocolError) {
        let check = FieldChecker("send")
        // The counts first, in field order, as the wire shape checks them. A send names one audience, so its user
        // ids and tokens are never more than max_recipients together either.
        try check.recipients(userIds.count, "user_ids", maximum: limits.maxRecipients)
        try check.recipients(tokens.count, "tokens", maximum: limits.maxRecipients)
        try check.recipients(excludeUserIds.count, "exclude_user_ids", maximum: limits.maxRecipients)
        if hasAlert { try alert.checkCounts(check) }
        try check.count(templateValues.count, "template_values", maximum: FieldRules.maximumListCount)
        try check.id(notificationType, "notification_type")
        let audiences = [!userIds.isEmpty, !tokens.isEmpty, !topic.isEmpty].count { $0 }
        try check.require(audiences == 1, "", "name exactly one audience: user_ids, tokens or topic")
        for user in userIds { try check.id(user, "user_ids") }
        for target in tokens { try check.token(target.token, "tokens") }
        try check.id(topic, "topic", required: false)
        for user in excludeUserIds { try check.id(user, "exclude_user_ids") }
        try check.id(idempotencyKey, "idempotency_key", required: false)
        if hasAlert { try alert.validate(check) }
        try check.id(sound, "sound", required: false)
        try check.id(threadID, "thread_id", required: false)
        try check.id(category, "category", required: false)
        try check.id(interruptionLevel, "interruption_level", required: false)
        if hasRelevanceScore {
            try check.require(
                relevanceScore.isFinite && (0...1).contains(relevanceScore), "relevance_score",
                "relevance_score is from 0 to 1")
        }
        try check.text(customJson, "custom_json")
        // Values fill the thread-id and category templates: ids, like the fields they become.
        for (name, value) in templateValues {
            try check.id(name, "template_values")
            try check.id(value, "template_values", required: false)
        }
        try check.id(collapseID, "collapse_id", required: false, maximumBytes: FieldRules.maximumCollapseIDBytes)
        if hasExpiration { try check.number(expiration, "expiration", in: 0...FieldRules.latestExpirationSeconds) }
        if hasPriority {
            try check.require([1, 5, 10].contains(priority), "priority", "priority is 10, 5 or 1, not \(priority)")
        }
        try check.id(scope, "scope", required: false)
        let schedule = FieldRules.sendAtRange(nowMilliseconds: nowMilliseconds)
        if sendAtMs != 0 { try check.milliseconds(sendAtMs, "send_at_ms", in: schedule) }
        if !sendAtLocal.isEmpty {
            try check.require(sendAtMs == 0, "send_at_local", "give send_at_ms or send_at_local, not both")
            try check.localDateTime(sendAtLocal, "send_at_local", in: schedule)
        }
    }
}

extension Pushrelay_V1_Alert {
    fileprivate func checkCounts(_ check: FieldChecker) throws(ProtocolError) {
        for (values, field) in [
            (titleLocArgs, "alert.title_loc_args"), (subtitleLocArgs, "alert.subtitle_loc_args"),
            (locArgs, "alert.loc_args"),
        ] {
            try check.count(values.count, field, maximum: FieldRules.maximumListCount)
        }
    }

    fileprivate func validate(_ check: FieldChecker) throws(ProtocolError) {
        for (value, field) in [
            (title, "alert.title"), (subtitle, "alert.subtitle"), (body, "alert.body"),
            (launchImage, "alert.launch_image"), (titleLocKey, "alert.title_loc_key"),
            (subtitleLocKey, "alert.subtitle_loc_key"), (locKey, "alert.loc_key"),
        ] {
            try check.text(value, field)
        }
        for (values, field) in [
            (titleLocArgs, "alert.title_loc_args"), (subtitleLocArgs, "alert.subtitle_loc_args"),
            (locArgs, "alert.loc_args"),
        ] {
            for value in values { try check.text(value, field) }
        }
    }
}

extension Pushrelay_V1_JobStatus: ValidatedRequest {
    /// Checks the fields of a `JobStatus` (Protocol/README.md, "Field rules").
    public func validate(limits: ProtocolLimits, nowMilliseconds: Int64) throws(ProtocolError) {
        try FieldChecker("job_status").id(jobID, "job_id")
    }
}

extension Pushrelay_V1_CancelJob: ValidatedRequest {
    /// Checks the fields of a `CancelJob` (Protocol/README.md, "Field rules").
    public func validate(limits: ProtocolLimits, nowMilliseconds: Int64) throws(ProtocolError) {
        try FieldChecker("cancel_job").id(jobID, "job_id")
    }
}

extension Pushrelay_V1_ListNotificationTypes: ValidatedRequest {
    /// A `ListNotificationTypes` has no fields to check.
    public func validate(limits: ProtocolLimits, nowMilliseconds: Int64) throws(ProtocolError) {}
}

extension Pushrelay_V1_QueryDeliveries: ValidatedRequest {
    /// Checks the fields of a `QueryDeliveries` (Protocol/README.md, "Field rules").
    public func validate(limits: ProtocolLimits, nowMilliseconds: Int64) throws(ProtocolError) {
        let check = FieldChecker("query_deliveries")
        try check.id(jobID, "job_id", required: false)
        try check.id(userID, "user_id", required: false)
        if !token.isEmpty { try check.token(token, "token") }
        try check.require(fromMs >= 0, "from_ms", "from_ms is a Unix time in milliseconds, 0 or later")
        try check.require(toMs >= 0, "to_ms", "to_ms is a Unix time in milliseconds, 0 or later")
        try check.number(limit, "limit", in: 0...FieldRules.maximumQueryLimit)
        try check.cursor(cursor, "cursor")
        let filters = [!jobID.isEmpty, !userID.isEmpty, !token.isEmpty, fromMs != 0 || toMs != 0]
        try check.require(
            filters.count(where: { $0 }) == 1, "", "give exactly one of job_id, user_id, token or from_ms/to_ms")
        // A range open at its end (to_ms 0) runs to the end of time.
        if toMs != 0 {
            try check.require(fromMs < toMs, "to_ms", "to_ms must be after from_ms")
        }
    }
}

extension Pushrelay_V1_SetPreferences: ValidatedRequest {
    /// Checks the fields of a `SetPreferences` (Protocol/README.md, "Field rules").
    public func validate(limits: ProtocolLimits, nowMilliseconds: Int64) throws(ProtocolError) {
        let check = FieldChecker("set_preferences")
        try check.count(preferences.count, "preferences", maximum: FieldRules.maximumListCount)
        try check.id(userID, "user_id")
        try check.ids(preferences.map(\.notificationType), "preferences.notification_type")
    }
}

extension Pushrelay_V1_GetPreferences: ValidatedRequest {
    /// Checks the fields of a `GetPreferences` (Protocol/README.md, "Field rules").
    public func validate(limits: ProtocolLimits, nowMilliseconds: Int64) throws(ProtocolError) {
        try FieldChecker("get_preferences").id(userID, "user_id")
    }
}

extension Pushrelay_V1_SetMute: ValidatedRequest {
    /// Checks the fields of a `SetMute` (Protocol/README.md, "Field rules").
    public func validate(limits: ProtocolLimits, nowMilliseconds: Int64) throws(ProtocolError) {
        let check = FieldChecker("set_mute")
        try check.id(userID, "user_id")
        try check.id(threadID, "thread_id", required: false)
        try check.id(scope, "scope", required: false)
        try check.milliseconds(untilMs, "until_ms", in: 0...FieldRules.latestMilliseconds)
        try check.require(threadID.isEmpty != scope.isEmpty, "", "a mute names a thread_id or a scope, exactly one")
    }
}

extension Pushrelay_V1_ClearMute: ValidatedRequest {
    /// Checks the fields of a `ClearMute` (Protocol/README.md, "Field rules").
    public func validate(limits: ProtocolLimits, nowMilliseconds: Int64) throws(ProtocolError) {
        let check = FieldChecker("clear_mute")
        try check.id(userID, "user_id")
        try check.id(threadID, "thread_id", required: false)
        try check.id(scope, "scope", required: false)
        try check.require(threadID.isEmpty != scope.isEmpty, "", "a mute names a thread_id or a scope, exactly one")
    }
}

extension Pushrelay_V1_ListMutes: ValidatedRequest {
    /// Checks the fields of a `ListMutes` (Protocol/README.md, "Field rules").
    public func validate(limits: ProtocolLimits, nowMilliseconds: Int64) throws(ProtocolError) {
        try FieldChecker("list_mutes").id(userID, "user_id")
    }
}

extension Pushrelay_V1_SetPresence: ValidatedRequest {
    /// Checks the fields of a `SetPresence` (Protocol/README.md, "Field rules").
    public func validate(limits: ProtocolLimits, nowMilliseconds: Int64) throws(ProtocolError) {
        let check = FieldChecker("set_presence")
        try check.id(userID, "user_id")
        try check.id(threadID, "thread_id")
        try check.number(seconds, "seconds", in: 0...FieldRules.maximumPresenceSeconds)
    }
}

extension Pushrelay_V1_SubscribeResults: ValidatedRequest {
    /// Checks the fields of a `SubscribeResults` (Protocol/README.md, "Field rules").
    public func validate(limits: ProtocolLimits, nowMilliseconds: Int64) throws(ProtocolError) {}
}

extension Pushrelay_V1_UnsubscribeResults: ValidatedRequest {
    /// Checks the fields of a `UnsubscribeResults` (Protocol/README.md, "Field rules").
    public func validate(limits: ProtocolLimits, nowMilliseconds: Int64) throws(ProtocolError) {}
}
