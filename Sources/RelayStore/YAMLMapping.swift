package import Yams

/// A YAML mapping whose keys are checked: plain strings, each once, and (when the allowed keys are given) known.
///
/// The one check of keys of the package's YAML files: tenant files (``TenantConfiguration/parse(yaml:id:file:)``) and
/// `serve`'s settings file. Each words a ``Problem`` its own way.
package struct YAMLMapping {
    /// One `key: value` of the mapping.
    package struct Entry {
        /// The key.
        package var key: String
        /// The key's node, for its line.
        package var keyNode: Node
        /// The value.
        package var value: Node
    }

    /// What is wrong with a mapping's keys, with the key's 1-based line when known; the first problem in the file's
    /// order is the one reported.
    package enum Problem: Error {
        /// The node is not a mapping.
        case notMapping
        /// A key is not a plain string (a list or a mapping), as the YAML library prints it.
        case keyNotString(String, line: Int?)
        /// A key stands twice.
        case duplicateKey(String, line: Int?)
        /// A key is not one of `allowed`.
        case unknownKey(String, line: Int?, allowed: [String])
    }

    /// The entries, in the file's order.
    package let entries: [Entry]

    /// Checks the keys of `node`, a mapping; `allowedKeys` `nil` allows any key.
    package init(_ node: Node, allowedKeys: [String]?) throws(Problem) {
        guard case .mapping(let mapping) = node else { throw .notMapping }
        var entries: [Entry] = []
        var seen = Set<String>()
        for (keyNode, value) in mapping {
            let line = keyNode.mark?.line
            guard case .scalar(let scalar) = keyNode else { throw .keyNotString("\(keyNode)", line: line) }
            let key = scalar.string
            guard seen.insert(key).inserted else { throw .duplicateKey(key, line: line) }
            if let allowedKeys, !allowedKeys.contains(key) {
                throw .unknownKey(key, line: line, allowed: allowedKeys)
            }
            entries.append(Entry(key: key, keyNode: keyNode, value: value))
        }
        self.entries = entries
    }
}
