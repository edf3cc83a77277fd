import Foundation
import PushRelayProtocol

/// The table of Protocol/README.md ("Field rules") that lists every `field` an ERROR of the relay names: each row's
/// field names, and the codes answered with each of them.
struct ErrorFieldTable {
    /// One row: the codes of its rule (none when only the counts refuse its fields) and its field names, a
    /// placeholder (`<request>`, `<name>`) standing for any name.
    struct Row: CustomStringConvertible {
        var codes: [String]
        var fields: [String]

        var description: String { "\(codes) \(fields)" }
    }

    /// The header the table is found by.
    static let header = "| Request | Field | Rule | Error and `field` |"

    var rows: [Row]

    /// The repository's Protocol/README.md.
    static let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Protocol/README.md")

    /// The table as Protocol/README.md has it.
    static func load() throws -> ErrorFieldTable {
        try ErrorFieldTable(markdown: String(contentsOf: readme, encoding: .utf8))
    }

    /// The table of `markdown`: the rows after ``header`` and its separator, up to the first line that is no row.
    init(markdown: String) throws {
        let lines = markdown.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let start = lines.firstIndex(of: Self.header) else { throw TableMissing() }
        rows = lines[(start + 2)...].prefix { $0.hasPrefix("|") }.map { line in
            let cells = line.split(separator: "|", omittingEmptySubsequences: false)
            let words = Self.codeSpans(String(cells[cells.count - 2]))
            return Row(
                codes: words.filter { $0.allSatisfy { $0.isUppercase || $0 == "_" } },
                fields: words.filter { !$0.contains(where: \.isUppercase) })
        }
    }

    struct TableMissing: Error {}

    /// The text of each code span (between backticks) of `text`.
    static func codeSpans(_ text: String) -> [String] {
        text.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }
            .map { String($0.element) }
    }

    /// Every field name of the table.
    var fields: Set<String> { Set(rows.flatMap(\.fields)) }

    /// Every pair of a code and a field the table promises.
    var pairs: Set<Pair> {
        Set(rows.flatMap { row in row.codes.flatMap { code in row.fields.map { Pair(code: code, field: $0) } } })
    }

    /// The table's field name that `field`, a name the relay answered, is: itself, or a name with a placeholder.
    func entry(for field: String) -> String? {
        fields.first { Self.matches(field, $0) }
    }

    /// Whether `field` is `name`, whose placeholders (`<name>`) stand for any part without a dot.
    static func matches(_ field: String, _ name: String) -> Bool {
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        let given = field.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == given.count else { return false }
        return zip(parts, given).allSatisfy { part, value in
            (part.hasPrefix("<") && part.hasSuffix(">") && !value.isEmpty) || part == value
        }
    }
}

/// A code and the `field` it is answered with.
struct Pair: Hashable, Sendable, CustomStringConvertible {
    var code: String
    var field: String

    var description: String { "\(code) \(field)" }
}

/// The field names the relay's sources write: the first argument of each `.invalidArgument(` and each `field:`
/// argument given as a literal (an interpolation `\(name)` read as the placeholder `<name>`), and in
/// RequestValidation.swift each field a `FieldChecker` checks, after its request's name (an empty one: the request
/// alone).
enum SourceFieldNames {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func collect() throws -> Set<String> {
        var names: Set<String> = []
        for folder in ["Sources/RelayServer", "Sources/PushRelayProtocol"] {
            let base = root.appendingPathComponent(folder)
            let files =
                FileManager.default.enumerator(at: base, includingPropertiesForKeys: nil)?
                .compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" } ?? []
            for file in files where !file.path.contains("/Generated/") {
                let text = try String(contentsOf: file, encoding: .utf8)
                // FieldRules.swift builds the names of the checks below from their arguments.
                if file.lastPathComponent != "FieldRules.swift" { names.formUnion(literalNames(text)) }
                if file.lastPathComponent == "RequestValidation.swift" { names.formUnion(checkedNames(text)) }
            }
        }
        return names
    }

    /// The literal first arguments of `.invalidArgument(` and the literal `field:` arguments of `text`.
    static func literalNames(_ text: String) -> [String] {
        let invalid = text.matches(of: /\.invalidArgument\(\s*"([^"]*)"/).map { String($0.output.1) }
        let fields = text.matches(of: /field: "([^"]*)"/).map { String($0.output.1) }
        return (invalid + fields).map { $0.replacing(/\\\((\w+)\)/) { "<\($0.output.1)>" } }
    }

    /// The fields RequestValidation.swift checks: in each extension, the literals naming fields (no spaces, lower
    /// case) after the name its `FieldChecker` is made with; the alert's are checked with the SEND's checker.
    static func checkedNames(_ text: String) -> [String] {
        text.split(separator: "\nextension ").flatMap { block -> [String] in
            let request =
                block.hasPrefix("Pushrelay_V1_Alert ")
                ? "send" : block.firstMatch(of: /FieldChecker\("(\w+)"\)/).map { String($0.output.1) }
            guard let request else { return [] }
            let body = block.replacing(/FieldChecker\("\w+"\)/, with: "")
            return body.matches(of: /"([a-z_.]*)"/).map { match in
                match.output.1.isEmpty ? request : "\(request).\(match.output.1)"
            }
        }
    }
}
