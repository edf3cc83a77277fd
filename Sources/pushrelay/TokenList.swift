import ArgumentParser
import Foundation

/// The tokens of a push command's `--token` options and its `--tokens-file` (one a line; blank lines skipped).
///
/// - Throws: `ValidationError` when there are none; what reading the file throws.
func tokenList(_ given: [String], file: String?) throws -> [String] {
    var tokens = given
    if let file {
        let text = try String(contentsOfFile: file, encoding: .utf8)
        tokens += text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
    }
    guard !tokens.isEmpty else { throw ValidationError("give at least one --token or a --tokens-file") }
    return tokens
}
