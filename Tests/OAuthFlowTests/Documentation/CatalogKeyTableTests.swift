import Foundation
@testable import OAuthFlow
import Testing

/// `Documentation/Catalog.md`'s key table against ``ProviderCatalog/settings``, in both directions:
/// every row of the one is a row of the other, cell for cell, and every documented key and alias
/// loads in strict mode.
@Suite("Catalog.md's key table is the settings table")
struct CatalogKeyTableTests {
    /// One row of the markdown table.
    struct DocumentedRow {
        var key: String
        var cells: [String]   // Key, Type, Default, Alias (OAuthKit), Read by, What it is, Example

        var type: String { cells[1] }
        var defaultValue: String { cells[2] }
        var aliases: String { cells[3] }
        var reader: String { cells[4] }
        var doc: String { cells[5] }
        var example: String { cells[6] }
    }

    static let header = "| Key | Type | Default | Alias (OAuthKit) | Read by | What it is | Example |"

    static func catalogDocument(filePath: String = #filePath) throws -> String {
        let root = URL(fileURLWithPath: filePath)
            .deletingLastPathComponent()   // Documentation
            .deletingLastPathComponent()   // OAuthFlowTests
            .deletingLastPathComponent()   // Tests
            .deletingLastPathComponent()   // repository root
        return try String(contentsOf: root.appendingPathComponent("Documentation/Catalog.md"), encoding: .utf8)
    }

    /// The rows of the table under `## Keys`, which starts with ``header``.
    static func documentedRows() throws -> [DocumentedRow] {
        let lines = try catalogDocument().split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let start = try #require(lines.firstIndex(of: header), "Catalog.md has no key table with the header \(header)")
        var rows: [DocumentedRow] = []
        for line in lines[(start + 2)...] {
            guard line.hasPrefix("|") else { break }
            let cells = line.dropFirst().dropLast().split(separator: "|", omittingEmptySubsequences: false)
                .map { $0.trimmingCharacters(in: .whitespaces) }
            try #require(cells.count == 7, "a row of Catalog.md's key table has \(cells.count) cells, not 7: \(line)")
            let key = cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            rows.append(DocumentedRow(key: key, cells: cells))
        }
        return rows
    }

    /// The markdown row a setting should have; `example` is kept from the document.
    static func expectedRow(_ setting: CatalogSetting, example: String) -> String {
        let aliases = setting.aliases.isEmpty ? "—" : setting.aliases.map { "`\($0)`" }.joined(separator: ", ")
        return "| `\(setting.key)` | \(setting.type) | \(setting.defaultValue) | \(aliases) | \(setting.reader.rawValue) | \(setting.doc) | \(example) |"
    }

    @Test("every key of the settings table is documented, and every documented key is in the table, in the same order")
    func sameKeys() throws {
        let documented = try Self.documentedRows()
        let table = ProviderCatalog.settings
        let documentedKeys = documented.map(\.key), tableKeys = table.map(\.key)
        for key in tableKeys where !documentedKeys.contains(key) {
            Issue.record("\(key) is in ProviderCatalog.settings but not in Catalog.md's key table")
        }
        for key in documentedKeys where !tableKeys.contains(key) {
            Issue.record("\(key) is in Catalog.md's key table but not in ProviderCatalog.settings")
        }
        #expect(documentedKeys == tableKeys, "Catalog.md lists the keys in another order than ProviderCatalog.settings")
        #expect(Set(tableKeys).count == tableKeys.count, "a key is in the settings table twice")
    }

    @Test("each documented row says what the settings table says: type, default, aliases, reader, description")
    func sameCells() throws {
        let documented = Dictionary(try Self.documentedRows().map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
        for setting in ProviderCatalog.settings {
            guard let row = documented[setting.key] else { continue }   // sameKeys reports it
            let expected = Self.expectedRow(setting, example: row.example)
            #expect("| " + row.cells.joined(separator: " | ") + " |" == expected, "Catalog.md's row of \(setting.key) should read:\n\(expected)")
        }
    }

    @Test("every documented key and alias is known in strict mode (given as null, which counts as absent)")
    func everyKeyKnown() throws {
        let keys = try Self.documentedRows().flatMap { row in
            [row.key] + row.aliases.split(separator: ",").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "` "))
            }.filter { $0 != "—" }
        }
        #expect(keys.contains("endSessionURL") && keys.contains("idTokenSigningAlgorithms") && keys.contains("accessTokenURL"))
        // id, tokenURL and clientID are in every entry loaded here already.
        for key in keys where !["id", "tokenURL", "clientID"].contains(key) {
            let json = #"[{"id": "demo", "tokenURL": "https://auth.example.com/token", "clientID": "app", "\#(key)": null}]"#
            #expect(throws: Never.self, "\(key)") { try ProviderCatalog.load(data: Data(json.utf8), environment: [:], strict: true) }
        }
    }

    @Test("every documented example loads in strict mode, or is refused for its value, never as an unknown key")
    func everyExampleLoads() throws {
        let environment = ["GOOGLE_CLIENT_SECRET": "g", "CREDENTIALS_DIRECTORY": "/nonexistent-authflow-test"]
        var loaded: [String] = []
        for row in try Self.documentedRows() {
            // The example's first code span is a JSON value.
            let spans = row.example.split(separator: "`", omittingEmptySubsequences: false)
            try #require(spans.count >= 3, "Catalog.md's example of \(row.key) has no code span")
            let value = String(spans[1])
            var fields = [("id", #""demo""#), ("tokenURL", #""https://auth.example.com/token""#), ("clientID", #""app""#)]
                .filter { $0.0 != row.key }
            fields.append((row.key, value))
            let json = "[{" + fields.map { "\"\($0.0)\": \($0.1)" }.joined(separator: ", ") + "}]"
            do {
                _ = try ProviderCatalog.load(data: Data(json.utf8), environment: environment, strict: true)
                loaded.append(row.key)
            } catch {
                let message = error.message ?? ""
                #expect(!message.contains("not a known key"), "\(row.key): \(message)")
                #expect(message.contains(": \(row.key)") || message.contains("\(row.key):"), "\(row.key)'s example failed elsewhere: \(message)")
            }
        }
        #expect(loaded.contains("endSessionURL") && loaded.contains("idTokenSigningAlgorithms"))
    }
}
