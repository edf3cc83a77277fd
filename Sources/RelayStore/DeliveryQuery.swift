import PostgresNIO

/// The text and binds of a delivery query, built in parts: `$1` is the tenant, ``bind(_:)`` adds a value and gives its
/// placeholder, ``afterKey(of:)`` the keyset condition of a page after a ``DeliveryKey``, and ``order(of:)`` the order
/// every delivery query answers in.
struct DeliveryQuery {
    private var binds = PostgresBindings()
    private let key: DeliveryKey?

    /// A query of `tenant`'s rows (`$1`), after `key` when given.
    init(tenant: String, key: DeliveryKey?) {
        self.key = key
        binds.append(tenant)
    }

    /// Adds `value` to the binds and returns its placeholder (`$2`, `$3`, …).
    mutating func bind<Value: PostgresNonThrowingEncodable>(_ value: Value) -> String {
        binds.append(value)
        return "$\(binds.count)"
    }

    /// The condition that a row of `alias` comes after the key in ``order(of:)`` (`true` without a key). Its
    /// `sent_at` bound lets the index start at the key instead of the newest row.
    mutating func afterKey(of alias: String) -> String {
        guard let key else { return "true" }
        let sentAt = "('epoch'::timestamptz + \(bind(key.sentAtMicroseconds))::int8 * interval '1 microsecond')"
        let (attempt, job, user, token) = (bind(key.attempt), bind(key.jobID), bind(key.userID), bind(key.token))
        return """
            \(alias).sent_at <= \(sentAt) AND (\(alias).sent_at, \(alias).attempt, \(alias).job_id, \
            coalesce(\(alias).user_id, ''), \(alias).token) < (\(sentAt), \(attempt)::int4, \(job)::text, \(user)::text, \
            \(token)::text)
            """
    }

    /// The order of delivery rows of `alias`: newest first, then by attempt, job, user and token, each descending,
    /// so that every row has one place and a page's last row says where the next page starts.
    static func order(of alias: String) -> String {
        """
        \(alias).sent_at DESC, \(alias).attempt DESC, \(alias).job_id DESC, coalesce(\(alias).user_id, '') DESC, \
        \(alias).token DESC
        """
    }

    /// The query `text`, whose placeholders are this builder's.
    func sql(_ text: String) -> PostgresQuery {
        PostgresQuery(unsafeSQL: text, binds: binds)
    }
}
