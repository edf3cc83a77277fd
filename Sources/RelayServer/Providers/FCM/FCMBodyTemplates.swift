import FCM
import Synchronization

/// The body templates of one job's FCM message, by what varies between its requests (the expiration, and the TTL
/// left): each is encoded once and shared by every page and pass of the job, then filled per token.
final class FCMBodyTemplates: Sendable {
    /// What makes two requests' messages differ.
    struct Key: Hashable {
        var expiration: Int64?
        var ttlSeconds: Int?
    }

    /// How many templates are kept: a job's requests share one or two expirations (a held page keeps its own).
    static let capacity = 16

    private let templates = Mutex([Key: FCMMessage.BodyTemplate]())

    /// The template of `key`, encoded from `message()` the first time it is asked for.
    func template(for key: Key, message: () -> FCMMessage) -> FCMMessage.BodyTemplate {
        if let template = templates.withLock({ $0[key] }) { return template }
        let template = message().bodyTemplate()
        templates.withLock {
            if $0.count >= Self.capacity { $0.removeAll(keepingCapacity: true) }
            $0[key] = template
        }
        return template
    }
}
