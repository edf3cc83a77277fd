import Foundation
import PushRelayProtocol
import RelayStore

/// SET_PREFERENCES, GET_PREFERENCES, SET_MUTE, CLEAR_MUTE, LIST_MUTES and SET_PRESENCE: what each user of the
/// tenant chose, which the recipient policy reads.
extension RelayService {
    func setPreferences(
        _ request: Pushrelay_V1_SetPreferences,
        tenant: TenantConfiguration
    ) async throws(ProtocolError) -> Pushrelay_V1_Preferences {
        var settings: [String: Bool] = [:]
        for preference in request.preferences {
            guard let type = tenant.notificationTypes[preference.notificationType] else {
                throw .invalidArgument(
                    "set_preferences.preferences.notification_type",
                    "unknown notification type '\(preference.notificationType)'"
                )
            }
            guard preference.enabled || type.optOutAllowed else {
                throw .invalidArgument(
                    "set_preferences.preferences.enabled",
                    "'\(preference.notificationType)' is mandatory and cannot be turned off"
                )
            }
            settings[preference.notificationType] = preference.enabled
        }
        let store = store
        try await fromStore { try await store.setPreferences(tenant: tenant.id, user: request.userID, settings) }
        return try await preferences(of: request.userID, tenant: tenant)
    }

    func preferences(of user: String, tenant: TenantConfiguration) async throws(ProtocolError)
        -> Pushrelay_V1_Preferences
    {
        let store = store
        let stored = try await fromStore { try await store.preferences(tenant: tenant.id, user: user) }
        var answer = Pushrelay_V1_Preferences()
        answer.userID = user
        answer.preferences = tenant.notificationTypes.sorted { $0.key < $1.key }.map { name, type in
            var preference = Pushrelay_V1_TypePreference()
            preference.notificationType = name
            preference.mandatory = !type.optOutAllowed
            preference.enabled = type.optOutAllowed ? stored[name] ?? type.defaultEnabled : true
            return preference
        }
        return answer
    }

    func setMute(_ request: Pushrelay_V1_SetMute, tenant: String) async throws(ProtocolError)
        -> Pushrelay_V1_Mute
    {
        let until = request.untilMs == 0 ? nil : Date(unixMilliseconds: request.untilMs)
        let store = store
        let mute = try await fromStore {
            try await store.setMute(
                tenant: tenant, user: request.userID, threadID: request.threadID.nonEmpty,
                scope: request.scope.nonEmpty, until: until)
        }
        return Pushrelay_V1_Mute(mute)
    }

    func clearMute(_ request: Pushrelay_V1_ClearMute, tenant: String) async throws(ProtocolError)
        -> Pushrelay_V1_ClearMuteResult
    {
        let store = store
        var answer = Pushrelay_V1_ClearMuteResult()
        answer.removed = UInt32(
            try await fromStore {
                try await store.clearMute(
                    tenant: tenant, user: request.userID, threadID: request.threadID.nonEmpty,
                    scope: request.scope.nonEmpty)
            })
        return answer
    }

    func listMutes(_ request: Pushrelay_V1_ListMutes, tenant: String) async throws(ProtocolError)
        -> Pushrelay_V1_MuteList
    {
        let store = store
        var answer = Pushrelay_V1_MuteList()
        answer.mutes = try await fromStore { try await store.mutes(tenant: tenant, user: request.userID) }
            .map(Pushrelay_V1_Mute.init)
        return answer
    }

    func setPresence(_ request: Pushrelay_V1_SetPresence, tenant: String) async throws(ProtocolError)
        -> Pushrelay_V1_Presence
    {
        let until = request.seconds == 0 ? nil : Date().addingTimeInterval(Double(request.seconds))
        let store = store
        try await fromStore {
            try await store.setPresence(tenant: tenant, user: request.userID, threadID: request.threadID, until: until)
        }
        var answer = Pushrelay_V1_Presence()
        answer.userID = request.userID
        answer.threadID = request.threadID
        answer.untilMs = until?.unixMilliseconds ?? 0
        return answer
    }
}
