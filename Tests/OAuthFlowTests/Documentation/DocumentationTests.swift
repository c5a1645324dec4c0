import Foundation
import Testing

/// Documentation/Architecture.md against the tree: the files its walk of one fetch names, the
/// functions it says each file holds, and every folder of `Sources/` in both directions. A file
/// moved or renamed, a step moved to another file, or a folder added or removed fails here until
/// the document says so.
@Suite("Architecture.md matches the sources")
struct DocumentationTests {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let walkHeading = "## One fetch, file by file"
    static let foldersHeading = "## Where things are"

    static func architecture() throws -> String {
        try String(contentsOf: root.appendingPathComponent("Documentation/Architecture.md"), encoding: .utf8)
    }

    /// The text under `heading`, up to the next second-level heading.
    static func section(_ heading: String, of text: String) -> String {
        guard let start = text.range(of: "\n" + heading + "\n") else { return "" }
        let rest = text[start.upperBound...]
        guard let end = rest.range(of: "\n## ") else { return String(rest) }
        return String(rest[..<end.lowerBound])
    }

    /// The spans between backticks, in order.
    static func codeSpans(_ text: String) -> [String] {
        text.split(separator: "`", omittingEmptySubsequences: false).enumerated().compactMap { $0.offset % 2 == 1 ? String($0.element) : nil }
    }

    /// The walk's numbered items: the file each starts with, and the item's whole text.
    static func walk(_ section: String) -> [(path: String, text: String)] {
        var items: [(path: String, text: String)] = []
        for line in section.split(separator: "\n", omittingEmptySubsequences: false) {
            if let dot = line.firstIndex(of: "."), dot > line.startIndex, line[..<dot].allSatisfy(\.isNumber),
               line[line.index(after: dot)...].hasPrefix(" `") {
                items.append((codeSpans(String(line)).first ?? "", String(line)))
            } else if line.hasPrefix("   "), !items.isEmpty {
                items[items.count - 1].text += "\n" + line
            }
        }
        return items
    }

    /// The file a walk path names: under `Sources/OAuthFlow/`.
    static func source(_ path: String) -> URL {
        root.appendingPathComponent("Sources/OAuthFlow").appendingPathComponent(path)
    }

    /// The functions a text names as `name(…)` or `Type.name(…)` in backticks.
    static func functionNames(_ text: String) -> [String] {
        codeSpans(text).compactMap { span in
            guard let paren = span.firstIndex(of: "(") else { return nil }
            let name = span[..<paren].split(separator: ".").last.map(String.init) ?? ""
            guard let first = name.first, first.isLowercase, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else { return nil }
            return name
        }
    }

    @Test("the walk of flow.clientCredentials names at most eight files, each once, and each exists")
    func walkFiles() throws {
        let items = Self.walk(Self.section(Self.walkHeading, of: try Self.architecture()))
        #expect(!items.isEmpty, "no numbered walk under \(Self.walkHeading)")
        #expect(items.count <= 8, "the walk names \(items.count) files: \(items.map(\.path))")
        #expect(Set(items.map(\.path)).count == items.count, "a file is entered twice: \(items.map(\.path))")
        for item in items {
            #expect(item.path.hasSuffix(".swift") && FileManager.default.fileExists(atPath: Self.source(item.path).path),
                    "the walk names \(item.path), which is not a file of Sources/OAuthFlow")
        }
    }

    @Test("each function the walk names on a file's line is declared in that file")
    func walkFunctions() throws {
        for item in Self.walk(Self.section(Self.walkHeading, of: try Self.architecture())) {
            let text = try String(contentsOf: Self.source(item.path), encoding: .utf8)
            let names = Self.functionNames(item.text)
            #expect(!names.isEmpty, "\(item.path): the walk names no function of it")
            for name in names {
                let declared = name == "init" ? text.contains("init(") : text.contains("func \(name)(") || text.contains("func \(name)<")
                #expect(declared, "the walk says \(item.path) holds \(name)(…), which it does not declare")
            }
        }
    }

    @Test("every file the fetch section names (the walk, its leaves, its branches) exists")
    func namedFiles() throws {
        let paths = Self.codeSpans(Self.section(Self.walkHeading, of: try Self.architecture())).filter { $0.hasSuffix(".swift") }
        #expect(paths.count > 8)
        for path in paths {
            #expect(FileManager.default.fileExists(atPath: Self.source(path).path), "Architecture.md names \(path), which is not a file of Sources/OAuthFlow")
        }
    }

    /// The folders the tree under "Where things are" describes, as paths from the package root:
    /// a line whose first word ends with `/`, indented two spaces per level (deeper lines are
    /// descriptions).
    static func describedFolders(_ section: String) -> Set<String> {
        var folders: Set<String> = []
        var stack: [String] = []
        for line in section.split(separator: "\n") {
            let indent = line.prefix { $0 == " " }.count
            guard indent <= 8, indent % 2 == 0, let word = line.split(separator: " ").first, word.hasSuffix("/"),
                  word.dropLast().allSatisfy({ $0.isLetter || $0.isNumber || "+-_".contains($0) }) else { continue }
            let level = indent / 2
            stack = Array(stack.prefix(level)) + [String(word.dropLast())]
            folders.insert(stack.joined(separator: "/"))
        }
        return folders
    }

    /// The files the tree lists one per line (a line whose first word ends with `.swift`), by the
    /// folder above them.
    static func describedFiles(_ section: String) -> [String: Set<String>] {
        var files: [String: Set<String>] = [:]
        var stack: [String] = []
        for line in section.split(separator: "\n") {
            let indent = line.prefix { $0 == " " }.count
            guard let word = line.split(separator: " ").first else { continue }
            if indent <= 8, indent % 2 == 0, word.hasSuffix("/") {
                stack = Array(stack.prefix(indent / 2)) + [String(word.dropLast())]
            } else if word.hasSuffix(".swift"), !stack.isEmpty {
                files[stack.joined(separator: "/"), default: []].insert(String(word))
            }
        }
        return files
    }

    /// Every folder under `Sources/`, `Sources` included, as paths from the package root.
    static func sourceFolders() -> Set<String> {
        var folders: Set<String> = ["Sources"]
        let sources = root.appendingPathComponent("Sources")
        guard let walker = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: [.isDirectoryKey], options: [.skipsHiddenFiles]) else {
            return folders
        }
        for case let url as URL in walker where (try? url.resourceValues(forKeys: [.isDirectoryKey]).isDirectory) == true {
            folders.insert("Sources/" + url.path.dropFirst(sources.path.count + 1))
        }
        return folders
    }

    @Test("every folder of Sources is described under \"Where things are\", and every folder described exists")
    func folders() throws {
        let described = Self.describedFolders(Self.section(Self.foldersHeading, of: try Self.architecture()))
        let actual = Self.sourceFolders()
        #expect(actual.count > 20, "the walk of Sources found \(actual.sorted())")
        #expect(actual.subtracting(described).isEmpty, "folders of Sources not described: \(actual.subtracting(described).sorted())")
        #expect(described.subtracting(actual).isEmpty, "folders described that do not exist: \(described.subtracting(actual).sorted())")
    }

    @Test("a folder whose files the tree lists one per line lists exactly the files it holds")
    func listedFiles() throws {
        let listed = Self.describedFiles(Self.section(Self.foldersHeading, of: try Self.architecture()))
        #expect(!listed.isEmpty)
        for (folder, files) in listed {
            let actual = Set(try FileManager.default.contentsOfDirectory(atPath: Self.root.appendingPathComponent(folder).path)
                .filter { $0.hasSuffix(".swift") })
            #expect(files == actual, "\(folder): not listed \(actual.subtracting(files).sorted()); listed but absent \(files.subtracting(actual).sorted())")
        }
    }
}
