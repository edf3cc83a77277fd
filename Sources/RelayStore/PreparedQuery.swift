import Logging
import PostgresNIO
import Synchronization

/// Names one statement of the store's hot path (a type per call site), which ``DeadlineClient`` runs as a named
/// prepared statement: PostgreSQL parses and plans it once per connection instead of at every call. A fan-out
/// page runs about ten statements; parsing and planning them was a tenth of the database's CPU.
protocol PreparedStatementName: Sendable {}

/// A query of the store's hot path as postgres-nio's prepared statement, named after `Name`.
///
/// Its text is the interpolated query's, as the call site builds it: the first text run under a name is the
/// name's for the rest of the process (``PreparedQueryTexts``), and a call site whose text ever differs is run
/// unprepared instead, so a name never stands for two texts.
struct PreparedQuery<Name: PreparedStatementName>: PostgresPreparedStatement {
    typealias Row = PostgresRow

    static var name: String { "pushrelay.\(Name.self)" }
    static var sql: String { PreparedQueryTexts.shared.text(of: ObjectIdentifier(Name.self)) ?? "" }

    let bindings: PostgresBindings

    func makeBindings() -> PostgresBindings { bindings }

    func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
}

/// The text of each ``PreparedQuery`` name: set by its first use, never changed.
final class PreparedQueryTexts: Sendable {
    /// The process's texts.
    static let shared = PreparedQueryTexts()

    private let texts = Mutex<[ObjectIdentifier: String]>([:])

    /// The text of `name`, if it was used.
    func text(of name: ObjectIdentifier) -> String? {
        texts.withLock { $0[name] }
    }

    /// Whether `sql` is `name`'s text, making it so when `name` has none yet.
    func claim(_ name: ObjectIdentifier, for sql: String) -> Bool {
        texts.withLock { texts in
            if let text = texts[name] { return text == sql }
            texts[name] = sql
            return true
        }
    }
}
