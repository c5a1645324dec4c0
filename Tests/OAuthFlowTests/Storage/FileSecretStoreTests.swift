import Foundation
import Glibc
import OAuthFlow
import Testing
import TestSupport

/// The file store: layout, permissions, atomic replace, key rules, and locking across tasks and processes.
///
/// Every test works in its own directory under the temporary directory and removes it afterwards.
/// Waits are bounded loops with a deadline; nothing asserts on elapsed time.
@Suite("FileSecretStore")
struct FileSecretStoreTests {}

// MARK: Support

private enum Fixture {
    /// Runs `body` with a fresh directory URL (not yet created) inside a fresh parent that is removed afterwards.
    static func withDirectory<T>(_ body: (_ parent: URL, _ store: URL) async throws -> T) async throws -> T {
        let parent = try TemporaryDirectory("FileSecretStoreTests")
        defer { parent.remove() }
        return try await body(parent.url, parent.url.appendingPathComponent("store", isDirectory: true))
    }

    /// Runs `body` with a store in a fresh directory.
    static func withStore<T>(lockTimeout: Duration = .seconds(30), _ body: (FileSecretStore, URL) async throws -> T) async throws -> T {
        try await withDirectory { _, directory in
            try await body(try FileSecretStore(directory: directory, lockTimeout: lockTimeout), directory)
        }
    }

    static func stat(_ url: URL) -> Glibc.stat? {
        var info = Glibc.stat()
        return lstat(url.path, &info) == 0 ? info : nil
    }

    static func mode(_ url: URL) -> mode_t? { stat(url).map { $0.st_mode & 0o7777 } }

    static func names(in directory: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
    }

    static func text(_ data: Data?) -> String? { data.map { String(decoding: $0, as: UTF8.self) } }
}

/// `/usr/bin/flock` (util-linux) holding a key's lock from another process.
private enum ExternalLock {
    static let flock = "/usr/bin/flock"
    static var isAvailable: Bool { FileManager.default.isExecutableFile(atPath: flock) }

    /// Starts `flock --no-fork <lock> sh -c <script>`: the shell itself holds the lock until it exits.
    static func hold(_ lock: URL, script: String) throws -> ChildProcess {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: flock)
        process.arguments = ["--exclusive", "--no-fork", lock.path, "/bin/sh", "-c", script]
        try process.run()
        return process
    }

    /// Runs `flock --nonblock <lock> true`: 0 when the lock was free, 1 when someone holds it.
    static func tryLock(_ lock: URL) async throws -> Int32? {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: flock)
        process.arguments = ["--exclusive", "--nonblock", "--conflict-exit-code", "1", lock.path, "true"]
        try process.run()
        return await exitStatus(of: process)
    }

    /// True once another process can take the lock, trying up to 200 times.
    ///
    /// Not always on the first try: a process that another test spawns while this one holds the
    /// lock shares the lock's open file description between fork and exec, so the lock can
    /// outlive our `close` by that moment.
    static func becomesFree(_ lock: URL) async throws -> Bool {
        for _ in 0..<200 {
            if try await tryLock(lock) == 0 { return true }
            try await Task.sleep(for: .milliseconds(10))
        }
        return false
    }

    /// The exit status once the process ends, or nil (after terminating it) when it outlives the deadline.
    static func exitStatus(of process: ChildProcess) async -> Int32? {
        guard await eventually({ !process.isRunning }) else {
            process.terminate()
            return nil
        }
        return process.terminationStatus
    }

    /// Stops a holder started with `exec sleep` and waits for it to go away.
    static func stop(_ process: ChildProcess) async {
        if process.isRunning { process.terminate() }
        _ = await eventually { !process.isRunning }
    }
}

/// Polls `condition` every 10 ms, at most 2,000 times (20 s); true once it holds.
private func eventually(_ condition: () -> Bool) async -> Bool {
    for _ in 0..<2_000 {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return condition()
}

/// Adds one to the decimal counter stored under `key`, inside the store's lock.
private func increment(_ store: FileSecretStore, _ key: String) async throws {
    try await store.withExclusiveAccess(to: key) { () async throws(OAuthError) -> Void in
        let current = try await store.load(key).flatMap { Int(String(decoding: $0, as: UTF8.self)) } ?? 0
        await Task.yield()  // invite interleaving: a missing lock would lose updates here
        try await store.save(Data(String(current + 1).utf8), for: key)
    }
}

// MARK: Round trip and layout

extension FileSecretStoreTests {
    @Test("save, load, keys and delete round trip")
    func roundTrip() async throws {
        try await Fixture.withStore { store, _ in
            #expect(try await store.load("github") == nil)
            #expect(try await store.keys() == [])
            try await store.save(Data("one".utf8), for: "github")
            try await store.save(Data("two".utf8), for: "billing-api")
            try await store.save(Data(), for: "empty")
            #expect(Fixture.text(try await store.load("github")) == "one")
            #expect(try await store.load("empty") == Data())
            #expect(try await store.keys() == ["billing-api", "empty", "github"])

            try await store.save(Data("three".utf8), for: "github")
            #expect(Fixture.text(try await store.load("github")) == "three")

            try await store.delete("github")
            try await store.delete("github")  // a missing entry is not an error
            #expect(try await store.load("github") == nil)
            #expect(try await store.keys() == ["billing-api", "empty"])
        }
    }

    @Test("entries are 0600, the directory and the parents it creates are 0700")
    func modes() async throws {
        try await Fixture.withDirectory { parent, _ in
            let existing = parent.appendingPathComponent("existing", isDirectory: true)
            try FileManager.default.createDirectory(at: existing, withIntermediateDirectories: false)
            #expect(chmod(existing.path, 0o755) == 0)
            let directory = existing.appendingPathComponent("a/b/store", isDirectory: true)

            let store = try FileSecretStore(directory: directory)
            try await store.save(Data("x".utf8), for: "github")
            try await store.withExclusiveAccess(to: "github") { () async throws(OAuthError) in }

            #expect(Fixture.mode(directory) == 0o700)
            #expect(Fixture.mode(existing.appendingPathComponent("a")) == 0o700)
            #expect(Fixture.mode(existing.appendingPathComponent("a/b")) == 0o700)
            #expect(Fixture.mode(existing) == 0o755, "an existing parent is left as it was")
            #expect(Fixture.mode(directory.appendingPathComponent("github.json")) == 0o600)
            #expect(Fixture.mode(directory.appendingPathComponent("github.lock")) == 0o600)
            #expect(store.directory.path == directory.path)
        }
    }

    @Test("keys() lists valid *.json entries only, skipping temporary, lock and foreign files")
    func keysSkipsOtherFiles() async throws {
        try await Fixture.withStore { store, directory in
            try await store.save(Data("x".utf8), for: "b")
            try await store.save(Data("x".utf8), for: "a.b_c-1")
            try await store.withExclusiveAccess(to: "b") { () async throws(OAuthError) in }
            for name in [".b.0123abcd.tmp", ".hidden.json", "notes.txt", "bad name.json", "x.json.bak", ".json"] {
                #expect(FileManager.default.createFile(atPath: directory.appendingPathComponent(name).path,
                                                       contents: Data(), attributes: [.posixPermissions: 0o600]))
            }
            #expect(try await store.keys() == ["a.b_c-1", "b"])
        }
    }

    @Test("delete keeps the lock file, so flock users never lock two different files")
    func deleteKeepsLockFile() async throws {
        try await Fixture.withStore { store, directory in
            try await store.withExclusiveAccess(to: "github") { () async throws(OAuthError) in
                try await store.save(Data("x".utf8), for: "github")
            }
            try await store.delete("github")
            #expect(try Fixture.names(in: directory) == ["github.lock"])
        }
    }
}

// MARK: Atomic replace

extension FileSecretStoreTests {
    @Test("save replaces by rename: a new inode each time and no temporary file left")
    func atomicReplace() async throws {
        try await Fixture.withStore { store, directory in
            let file = directory.appendingPathComponent("github.json")
            try await store.save(Data("first".utf8), for: "github")
            let first = try #require(Fixture.stat(file)).st_ino
            try await store.save(Data("second".utf8), for: "github")
            let second = try #require(Fixture.stat(file)).st_ino
            #expect(first != second)
            #expect(Fixture.text(try await store.load("github")) == "second")
            #expect(try Fixture.names(in: directory) == ["github.json"])
        }
    }

    @Test("a save whose rename fails (the entry is a directory) leaves it intact and no temporary file")
    func failedRenameLeavesNoTrace() async throws {
        try await Fixture.withStore { store, directory in
            // Tests may run as root, which ignores directory permissions; a directory in the
            // entry's place makes rename(2) fail with EISDIR for everyone.
            let blocker = directory.appendingPathComponent("github.json", isDirectory: true)
            try FileManager.default.createDirectory(at: blocker, withIntermediateDirectories: false)
            #expect(FileManager.default.createFile(atPath: blocker.appendingPathComponent("inside").path, contents: Data("old".utf8)))

            let error = await #expect(throws: OAuthError.self) {
                try await store.save(Data("SECRET-VALUE".utf8), for: "github")
            }
            #expect(error?.code == .storage)
            #expect(error?.providerID == "github")
            #expect(error?.message?.contains(blocker.path) == true)
            #expect(error?.message?.contains("Is a directory") == true)
            #expect((error?.underlying as? POSIXError)?.code == .EISDIR)
            #expect(error.map { String(describing: $0).contains("SECRET-VALUE") } == false)
            #expect(try Fixture.names(in: directory) == ["github.json"])
            #expect(try Fixture.names(in: blocker) == ["inside"])
        }
    }

    @Test("an oversized save is refused before touching the disk; the old entry stays")
    func oversizedSave() async throws {
        try await Fixture.withStore { store, directory in
            try await store.save(Data("old".utf8), for: "github")
            let error = await #expect(throws: OAuthError.self) {
                try await store.save(Data(count: FileSecretStore.maximumEntrySize + 1), for: "github")
            }
            #expect(error?.code == .storage)
            #expect(Fixture.text(try await store.load("github")) == "old")
            #expect(try Fixture.names(in: directory) == ["github.json"])
            try await store.save(Data(count: FileSecretStore.maximumEntrySize), for: "github")
            #expect(try await store.load("github")?.count == FileSecretStore.maximumEntrySize)
        }
    }
}

// MARK: Refusals

extension FileSecretStoreTests {
    @Test("load refuses an entry others can read, naming the mode and the fix, never the data")
    func refusesWideFile() async throws {
        try await Fixture.withStore { store, directory in
            let file = directory.appendingPathComponent("github.json")
            try await store.save(Data("SECRET-VALUE".utf8), for: "github")
            #expect(chmod(file.path, 0o644) == 0)
            let error = await #expect(throws: OAuthError.self) { try await store.load("github") }
            #expect(error?.code == .storage)
            #expect(error?.providerID == "github")
            #expect(error?.message?.contains("mode 0644") == true)
            #expect(error?.message?.contains("chmod 600 \"\(file.path)\"") == true)
            #expect(error.map { String(describing: $0).contains("SECRET-VALUE") } == false)

            #expect(chmod(file.path, 0o600) == 0)
            #expect(Fixture.text(try await store.load("github")) == "SECRET-VALUE")
        }
    }

    @Test("load refuses a symbolic link in place of the entry")
    func refusesSymlink() async throws {
        try await Fixture.withStore { store, directory in
            let target = directory.appendingPathComponent("elsewhere")
            #expect(FileManager.default.createFile(atPath: target.path, contents: Data("x".utf8), attributes: [.posixPermissions: 0o600]))
            #expect(symlink(target.path, directory.appendingPathComponent("github.json").path) == 0)
            let error = await #expect(throws: OAuthError.self) { try await store.load("github") }
            #expect(error?.code == .storage)
            #expect(error?.message?.contains("symbolic link") == true)
        }
    }

    @Test("load refuses a FIFO without hanging, and a directory, in place of the entry")
    func refusesSpecialFiles() async throws {
        try await Fixture.withStore { store, directory in
            #expect(mkfifo(directory.appendingPathComponent("pipe.json").path, 0o600) == 0)
            try FileManager.default.createDirectory(at: directory.appendingPathComponent("dir.json"), withIntermediateDirectories: false,
                                                    attributes: [.posixPermissions: 0o700])
            for key in ["pipe", "dir"] {
                let error = await #expect(throws: OAuthError.self) { try await store.load(key) }
                #expect(error?.code == .storage)
                #expect(error?.message?.contains("not a regular file") == true)
            }
        }
    }

    @Test("load refuses an entry over the size limit")
    func refusesOversizedFile() async throws {
        try await Fixture.withStore { store, directory in
            let file = directory.appendingPathComponent("github.json")
            #expect(FileManager.default.createFile(atPath: file.path, contents: Data(count: FileSecretStore.maximumEntrySize + 1),
                                                   attributes: [.posixPermissions: 0o600]))
            let error = await #expect(throws: OAuthError.self) { try await store.load("github") }
            #expect(error?.code == .storage)
            #expect(error?.message?.contains("limit") == true)
        }
    }

    @Test("the store refuses a directory group or others can access", arguments: [0o755, 0o750, 0o701, 0o707] as [mode_t])
    func refusesWideDirectory(mode: mode_t) async throws {
        try await Fixture.withDirectory { _, directory in
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
            #expect(chmod(directory.path, mode) == 0)
            let error = #expect(throws: OAuthError.self) { try FileSecretStore(directory: directory) }
            #expect(error?.code == .storage)
            #expect(error?.message?.contains("mode 0\(String(mode, radix: 8))") == true)
            #expect(error?.message?.contains("chmod 700") == true)
            #expect(Fixture.mode(directory) == mode, "the store refuses; it does not change the mode")
        }
    }

    @Test("an open store refuses to load or save once its directory is widened")
    func refusesDirectoryWidenedLater() async throws {
        try await Fixture.withStore { store, directory in
            try await store.save(Data("x".utf8), for: "github")
            #expect(chmod(directory.path, 0o755) == 0)
            await #expect(throws: OAuthError.self) { try await store.load("github") }
            await #expect(throws: OAuthError.self) { try await store.save(Data("y".utf8), for: "github") }
            #expect(chmod(directory.path, 0o700) == 0)
            #expect(Fixture.text(try await store.load("github")) == "x")
        }
    }

    @Test("the store refuses a path that is not a directory")
    func refusesFileAsDirectory() async throws {
        try await Fixture.withDirectory { parent, _ in
            let file = parent.appendingPathComponent("file")
            #expect(FileManager.default.createFile(atPath: file.path, contents: Data()))
            #expect(throws: OAuthError.self) { try FileSecretStore(directory: file) }
            #expect(throws: OAuthError.self) { try FileSecretStore(directory: file.appendingPathComponent("below")) }
        }
    }

    @Test("the store refuses a directory or an entry owned by another user (needs root to set up)",
          .enabled(if: geteuid() == 0, "only root can give a file to another user"))
    func refusesForeignOwner() async throws {
        try await Fixture.withStore { store, directory in
            let file = directory.appendingPathComponent("github.json")
            try await store.save(Data("x".utf8), for: "github")
            #expect(chown(file.path, 65534, 65534) == 0)
            let fileError = await #expect(throws: OAuthError.self) { try await store.load("github") }
            #expect(fileError?.message?.contains("owned by uid 65534") == true)

            #expect(chown(directory.path, 65534, 65534) == 0)
            let directoryError = #expect(throws: OAuthError.self) { try FileSecretStore(directory: directory) }
            #expect(directoryError?.message?.contains("owned by uid 65534") == true)
        }
    }
}

// MARK: The umask

/// The umask is process-wide and the tests run in parallel, so changing it here could widen or
/// narrow files other tests create meanwhile. The test below therefore runs its probe in a child
/// process: this test binary again, filtered to `umaskProbe`, with the umask set in the child only.
private enum UmaskProbe {
    static let directoryVariable = "OAUTHFLOW_TEST_UMASK_PROBE_DIRECTORY"
    static let umaskVariable = "OAUTHFLOW_TEST_UMASK_PROBE_UMASK"
    static var isChild: Bool { ProcessInfo.processInfo.environment[directoryVariable] != nil }
}

extension FileSecretStoreTests {
    @Test("the umask never widens nor narrows the store's modes (probe runs in a child process)",
          .enabled(if: !UmaskProbe.isChild), arguments: ["000", "022", "277"])
    func umaskDoesNotChangeModes(umask: String) async throws {
        try await Fixture.withDirectory { _, directory in
            let nested = directory.appendingPathComponent("a/store", isDirectory: true)
            let child = ChildProcess()
            child.executableURL = URL(fileURLWithPath: "/proc/self/exe")
            child.arguments = ["--testing-library", "swift-testing", "--filter", "umaskProbe"]
            var environment = ProcessInfo.processInfo.environment
            environment[UmaskProbe.directoryVariable] = nested.path
            environment[UmaskProbe.umaskVariable] = umask
            child.environment = environment
            child.standardOutput = FileHandle.nullDevice
            child.standardError = FileHandle.nullDevice
            try child.run()
            #expect(await ExternalLock.exitStatus(of: child) == 0, "the probe process failed")

            try #require(FileManager.default.fileExists(atPath: nested.appendingPathComponent("github.json").path),
                         "the probe did not run: is /proc/self/exe this test binary?")
            #expect(Fixture.mode(directory) == 0o700)
            #expect(Fixture.mode(directory.appendingPathComponent("a")) == 0o700)
            #expect(Fixture.mode(nested) == 0o700)
            #expect(Fixture.mode(nested.appendingPathComponent("github.json")) == 0o600)
            #expect(Fixture.mode(nested.appendingPathComponent("github.lock")) == 0o600)
            #expect(try Fixture.names(in: nested) == ["github.json", "github.lock"])
        }
    }

    @Test("umask probe: runs only in the child process started by the test above",
          .enabled(if: UmaskProbe.isChild))
    func umaskProbe() async throws {
        let environment = ProcessInfo.processInfo.environment
        let path = try #require(environment[UmaskProbe.directoryVariable])
        let value = try #require(environment[UmaskProbe.umaskVariable].flatMap { mode_t($0, radix: 8) })
        umask(value)  // this process runs nothing else
        let store = try FileSecretStore(directory: URL(fileURLWithPath: path, isDirectory: true))
        try await store.save(Data("x".utf8), for: "github")
        try await store.save(Data("y".utf8), for: "github")
        try await store.withExclusiveAccess(to: "github") { () async throws(OAuthError) in }
        try await store.withExclusiveAccess(to: "github") { () async throws(OAuthError) in }
        #expect(Fixture.text(try await store.load("github")) == "y")
    }
}

// MARK: Keys and the default directory

extension FileSecretStoreTests {
    @Test("invalid keys are rejected by every operation and touch nothing",
          arguments: ["", "../x", "a/b", ".hidden", "..", "a b", "é", "a\u{0}b", "x:y", String(repeating: "k", count: 129)])
    func invalidKeys(key: String) async throws {
        try await Fixture.withStore { store, directory in
            let load = await #expect(throws: OAuthError.self) { try await store.load(key) }
            #expect(load?.code == .configuration)
            let save = await #expect(throws: OAuthError.self) { try await store.save(Data("x".utf8), for: key) }
            #expect(save?.code == .configuration)
            await #expect(throws: OAuthError.self) { try await store.delete(key) }
            await #expect(throws: OAuthError.self) {
                try await store.withExclusiveAccess(to: key) { () async throws(OAuthError) in }
            }
            let inside = try Fixture.names(in: directory)
            let beside = try Fixture.names(in: directory.deletingLastPathComponent())
            #expect(inside == [])
            #expect(beside == ["store"])
            #expect(!FileSecretStore.isValidKey(key))
        }
    }

    @Test("valid keys: provider ids", arguments: ["github", "a.b_c-1", "A9", "x..", String(repeating: "k", count: 128)])
    func validKeys(key: String) async throws {
        #expect(FileSecretStore.isValidKey(key))
        try await Fixture.withStore { store, _ in
            try await store.save(Data("x".utf8), for: key)
            #expect(try await store.keys() == [key])
        }
    }

    struct DefaultDirectoryCase: Sendable, CustomTestStringConvertible {
        var environment: [String: String]
        var name: String
        var expected: String?
        var testDescription: String {
            let variables = environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            return "[\(variables)] \(name) → \(expected ?? "throws")"
        }
    }

    @Test("default directory: XDG_STATE_HOME when absolute, else HOME/.local/state", arguments: [
        DefaultDirectoryCase(environment: ["XDG_STATE_HOME": "/xdg", "HOME": "/home/u"], name: "oauthflow", expected: "/xdg/oauthflow"),
        DefaultDirectoryCase(environment: ["XDG_STATE_HOME": "/xdg/", "HOME": "/home/u"], name: "authflow", expected: "/xdg/authflow"),
        DefaultDirectoryCase(environment: ["XDG_STATE_HOME": "rel/state", "HOME": "/home/u"], name: "oauthflow",
                             expected: "/home/u/.local/state/oauthflow"),
        DefaultDirectoryCase(environment: ["XDG_STATE_HOME": "", "HOME": "/home/u"], name: "oauthflow",
                             expected: "/home/u/.local/state/oauthflow"),
        DefaultDirectoryCase(environment: ["HOME": "/home/u"], name: "authflow", expected: "/home/u/.local/state/authflow"),
        DefaultDirectoryCase(environment: ["HOME": "relative"], name: "oauthflow", expected: nil),
        DefaultDirectoryCase(environment: [:], name: "oauthflow", expected: nil),
        DefaultDirectoryCase(environment: ["HOME": "/home/u"], name: "a/b", expected: nil),
        DefaultDirectoryCase(environment: ["HOME": "/home/u"], name: "..", expected: nil),
        DefaultDirectoryCase(environment: ["HOME": "/home/u"], name: "", expected: nil),
    ])
    func defaultDirectory(_ test: DefaultDirectoryCase) throws {
        if let expected = test.expected {
            let url = try FileSecretStore.defaultDirectory(name: test.name, environment: test.environment)
            #expect(url.standardizedFileURL.path == expected)
        } else {
            let error = #expect(throws: OAuthError.self) {
                try FileSecretStore.defaultDirectory(name: test.name, environment: test.environment)
            }
            #expect(error?.code == .configuration)
        }
    }

    @Test("init without a directory creates the default one, 0700 with 0700 parents")
    func initCreatesDefaultDirectory() async throws {
        try await Fixture.withDirectory { parent, _ in
            let store = try FileSecretStore(environment: ["HOME": parent.path, "XDG_STATE_HOME": "relative"])
            let expected = parent.appendingPathComponent(".local/state/oauthflow")
            #expect(store.directory.standardizedFileURL.path == expected.path)
            #expect(Fixture.mode(expected) == 0o700)
            #expect(Fixture.mode(parent.appendingPathComponent(".local")) == 0o700)
            #expect(Fixture.mode(parent.appendingPathComponent(".local/state")) == 0o700)
            try await store.save(Data("x".utf8), for: "github")
            #expect(FileManager.default.fileExists(atPath: expected.appendingPathComponent("github.json").path))
        }
    }
}

// MARK: Locking in one process

extension FileSecretStoreTests {
    @Test("50 tasks incrementing one key under the lock lose no update")
    func concurrentWritersOneKey() async throws {
        try await Fixture.withStore { store, _ in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<50 { group.addTask { try await increment(store, "counter") } }
                try await group.waitForAll()
            }
            #expect(Fixture.text(try await store.load("counter")) == "50")
        }
    }

    @Test("keys lock independently: 4 keys × 25 tasks in parallel")
    func concurrentWritersManyKeys() async throws {
        try await Fixture.withStore { store, _ in
            let keys = ["a", "b", "c", "d"]
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<25 {
                    for key in keys { group.addTask { try await increment(store, key) } }
                }
                try await group.waitForAll()
            }
            for key in keys { #expect(Fixture.text(try await store.load(key)) == "25") }
        }
    }

    @Test("two stores on one directory exclude each other through the flock (no thread blocked)")
    func twoStoresOneDirectory() async throws {
        try await Fixture.withDirectory { _, directory in
            let first = try FileSecretStore(directory: directory)
            let second = try FileSecretStore(directory: directory)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<40 {
                    let store = index.isMultiple(of: 2) ? first : second
                    group.addTask { try await increment(store, "counter") }
                }
                try await group.waitForAll()
            }
            #expect(Fixture.text(try await first.load("counter")) == "40")
        }
    }

    @Test("a task cancelled before it holds the lock throws .cancelled and skips the body")
    func cancelledBeforeLocking() async throws {
        try await Fixture.withStore { store, _ in
            let task = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await store.withExclusiveAccess(to: "github") { () async throws(OAuthError) -> Bool in true }
            }
            guard case .failure(let error as OAuthError) = await task.result else {
                Issue.record("the body ran in a cancelled task")
                return
            }
            #expect(error.code == .cancelled)
            let ranAfterwards = try await store.withExclusiveAccess(to: "github") { () async throws(OAuthError) -> Bool in true }
            #expect(ranAfterwards)
        }
    }

    @Test("the lock is released when the body throws")
    func releasedOnThrow() async throws {
        try await Fixture.withStore(lockTimeout: .seconds(5)) { store, directory in
            let error = await #expect(throws: OAuthError.self) {
                try await store.withExclusiveAccess(to: "github") { () async throws(OAuthError) in
                    throw OAuthError(.reauthorizationRequired, message: "from the body")
                }
            }
            #expect(error?.code == .reauthorizationRequired)
            #expect(error?.message == "from the body")
            let value = try await store.withExclusiveAccess(to: "github") { () async throws(OAuthError) -> Int in 7 }
            #expect(value == 7)
            if ExternalLock.isAvailable {
                #expect(try await ExternalLock.becomesFree(directory.appendingPathComponent("github.lock")))
            }
        }
    }
}

// MARK: Locking across processes (flock(1) from util-linux)

extension FileSecretStoreTests {
    @Test("while the body runs, another process cannot take the lock; afterwards it can",
          .enabled(if: ExternalLock.isAvailable, "needs /usr/bin/flock (util-linux)"))
    func heldAgainstOtherProcesses() async throws {
        try await Fixture.withStore { store, directory in
            let lock = directory.appendingPathComponent("github.lock")
            let inside = try await store.withExclusiveAccess(to: "github") { () async throws(OAuthError) -> Int32? in
                do { return try await ExternalLock.tryLock(lock) } catch { return -1 }
            }
            #expect(inside == 1)
            #expect(try await ExternalLock.becomesFree(lock))
        }
    }

    @Test("the body runs only after another process releases the lock",
          .enabled(if: ExternalLock.isAvailable, "needs /usr/bin/flock (util-linux)"))
    func waitsForOtherProcess() async throws {
        try await Fixture.withStore { store, directory in
            let held = directory.appendingPathComponent("held")
            let released = directory.appendingPathComponent("released")
            // The holder writes `released` before it exits, and exiting is what releases the lock.
            let holder = try ExternalLock.hold(directory.appendingPathComponent("github.lock"),
                                               script: "touch '\(held.path)'; sleep 1; touch '\(released.path)'")
            defer { if holder.isRunning { holder.terminate() } }
            try #require(await eventually { FileManager.default.fileExists(atPath: held.path) }, "the external holder never started")

            let sawRelease = try await store.withExclusiveAccess(to: "github") { () async throws(OAuthError) -> Bool in
                FileManager.default.fileExists(atPath: released.path)
            }
            #expect(sawRelease)
            #expect(await ExternalLock.exitStatus(of: holder) == 0)
        }
    }

    @Test("waiting longer than lockTimeout throws .timedOut naming the key",
          .enabled(if: ExternalLock.isAvailable, "needs /usr/bin/flock (util-linux)"))
    func timesOut() async throws {
        try await Fixture.withStore(lockTimeout: .milliseconds(200)) { store, directory in
            let held = directory.appendingPathComponent("held")
            // Held until this test stops it: the outcome does not depend on timing.
            let holder = try ExternalLock.hold(directory.appendingPathComponent("github.lock"),
                                               script: "touch '\(held.path)'; exec sleep 120")
            try #require(await eventually { FileManager.default.fileExists(atPath: held.path) }, "the external holder never started")

            let error = await #expect(throws: OAuthError.self) {
                try await store.withExclusiveAccess(to: "github") { () async throws(OAuthError) in
                    Issue.record("the body ran while another process held the lock")
                }
            }
            #expect(error?.code == .timedOut)
            #expect(error?.providerID == "github")
            #expect(error?.message?.contains("github.lock") == true)
            #expect(error?.isRetryable == true)

            await ExternalLock.stop(holder)
            // Once the holder is gone, the in-process lock was released too: the next call gets in.
            #expect(try await store.withExclusiveAccess(to: "github") { () async throws(OAuthError) -> Bool in true })
        }
    }

    @Test("cancelling a task that waits for the lock throws .cancelled",
          .enabled(if: ExternalLock.isAvailable, "needs /usr/bin/flock (util-linux)"))
    func cancelledWhileWaiting() async throws {
        try await Fixture.withStore { store, directory in
            let held = directory.appendingPathComponent("held")
            let holder = try ExternalLock.hold(directory.appendingPathComponent("github.lock"),
                                               script: "touch '\(held.path)'; exec sleep 120")
            try #require(await eventually { FileManager.default.fileExists(atPath: held.path) }, "the external holder never started")

            let waiter = Task {
                try await store.withExclusiveAccess(to: "github") { () async throws(OAuthError) in
                    Issue.record("the body ran while another process held the lock")
                }
            }
            waiter.cancel()
            let result = await waiter.result
            await ExternalLock.stop(holder)
            guard case .failure(let error as OAuthError) = result else {
                Issue.record("the waiter was not cancelled")
                return
            }
            #expect(error.code == .cancelled)
            #expect(error.providerID == "github")
        }
    }
}

// MARK: Encrypted entries

private enum Encrypted {
    static let token = "at_Zq81mXv0cLr5Tn2wYb6k"
    static let entry = Data(#"{"version":1,"providerID":"github","accessToken":"\#(token)","tokenType":"Bearer"}"#.utf8)

    static func store(_ directory: URL, _ key: StoreKey?, previous: [StoreKey] = []) throws -> FileSecretStore {
        try FileSecretStore(directory: directory, encryption: key.map { EntryEncryption(key: $0, previousKeys: previous) })
    }

    static func bytes(_ directory: URL, _ key: String) throws -> Data {
        try Data(contentsOf: directory.appendingPathComponent("\(key).json"))
    }
}

extension FileSecretStoreTests {
    @Test("with encryption, the file on disk is sealed (OAFE, the key id), 0600, holds no token, and loads back")
    func encryptedRoundTrip() async throws {
        try await Fixture.withDirectory { _, directory in
            let key = try StoreKey.generate()
            let store = try Encrypted.store(directory, key)
            try await store.save(Encrypted.entry, for: "github")
            let onDisk = try Encrypted.bytes(directory, "github")
            #expect(onDisk.range(of: Data(Encrypted.token.utf8)) == nil)
            #expect(onDisk.range(of: Data("accessToken".utf8)) == nil)
            #expect(EntryEncryption.isSealed(onDisk))
            #expect(EntryEncryption.keyID(of: onDisk) == key.id)
            #expect(onDisk.count == Encrypted.entry.count + EntryEncryption.overhead)
            #expect(Fixture.mode(directory.appendingPathComponent("github.json")) == 0o600)
            #expect(try await store.load("github") == Encrypted.entry)
            // A fresh store with the same key, as another process would open it.
            #expect(try await Encrypted.store(directory, key).load("github") == Encrypted.entry)
            #expect(try await store.keys() == ["github"])
        }
    }

    @Test("a wrong key, or no key, is a .storage error and the file stays byte-identical")
    func encryptedWrongKey() async throws {
        try await Fixture.withDirectory { _, directory in
            let key = try StoreKey.generate()
            try await Encrypted.store(directory, key).save(Encrypted.entry, for: "github")
            let before = try Encrypted.bytes(directory, "github")
            let other = try StoreKey.generate()
            let wrong = await #expect(throws: OAuthError.self) { try await Encrypted.store(directory, other).load("github") }
            #expect(wrong?.code == .storage)
            #expect(wrong?.providerID == "github")
            #expect(wrong?.message?.contains("sealed with store key \(key.id), which is not configured") == true)
            #expect(wrong?.message?.contains(directory.appendingPathComponent("github.json").path) == true)
            let none = await #expect(throws: OAuthError.self) { try await Encrypted.store(directory, nil).load("github") }
            #expect(none?.code == .storage)
            #expect(none?.message?.contains("it is encrypted (store key \(key.id)) and this store has no key") == true)
            #expect(try Encrypted.bytes(directory, "github") == before)
            #expect(try Fixture.names(in: directory) == ["github.json"])
        }
    }

    @Test("a changed byte on disk (header, nonce, ciphertext, tag) is a .storage error; the file is left as it is",
          arguments: [4, 9, 14, 30, -1])
    func encryptedTampered(offset: Int) async throws {
        try await Fixture.withDirectory { _, directory in
            let store = try Encrypted.store(directory, try StoreKey.generate())
            try await store.save(Encrypted.entry, for: "github")
            var bytes = Array(try Encrypted.bytes(directory, "github"))
            bytes[offset < 0 ? bytes.count + offset : offset] ^= 0x01
            let file = directory.appendingPathComponent("github.json")
            try Data(bytes).write(to: file)
            #expect(chmod(file.path, 0o600) == 0)
            let error = await #expect(throws: OAuthError.self) { try await store.load("github") }
            #expect(error?.code == .storage)
            #expect(error?.message?.contains("cannot open the encrypted entry for \"github\"") == true)
            #expect(error.map { String(reflecting: $0).contains(Encrypted.token) } == false)
            #expect(try Encrypted.bytes(directory, "github") == Data(bytes))
        }
    }

    @Test("an encrypted entry renamed to another provider's name does not open")
    func encryptedRenamed() async throws {
        try await Fixture.withDirectory { _, directory in
            let store = try Encrypted.store(directory, try StoreKey.generate())
            try await store.save(Encrypted.entry, for: "github")
            #expect(rename(directory.appendingPathComponent("github.json").path, directory.appendingPathComponent("gitlab.json").path) == 0)
            let error = await #expect(throws: OAuthError.self) { try await store.load("gitlab") }
            #expect(error?.code == .storage)
            #expect(error?.providerID == "gitlab")
            #expect(error?.message?.contains("belongs to another provider") == true)
            #expect(try await store.load("github") == nil)
        }
    }

    @Test("key rotation: an entry sealed with the previous key loads, and its next save carries the new key id")
    func encryptedRotation() async throws {
        try await Fixture.withDirectory { _, directory in
            let old = try StoreKey.generate()
            let new = try StoreKey.generate()
            try await Encrypted.store(directory, old).save(Encrypted.entry, for: "github")
            let rotated = try Encrypted.store(directory, new, previous: [old])
            #expect(try await rotated.load("github") == Encrypted.entry)
            #expect(EntryEncryption.keyID(of: try Encrypted.bytes(directory, "github")) == old.id)  // loading writes nothing
            try await rotated.save(Encrypted.entry, for: "github")
            #expect(EntryEncryption.keyID(of: try Encrypted.bytes(directory, "github")) == new.id)
            #expect(try await Encrypted.store(directory, new).load("github") == Encrypted.entry)
            let stale = await #expect(throws: OAuthError.self) { try await Encrypted.store(directory, old).load("github") }
            #expect(stale?.message?.contains("sealed with store key \(new.id)") == true)
        }
    }

    @Test("migration: a plaintext entry loads when encryption is turned on, and is sealed at its next save")
    func encryptedMigration() async throws {
        try await Fixture.withDirectory { _, directory in
            try await Encrypted.store(directory, nil).save(Encrypted.entry, for: "github")
            let key = try StoreKey.generate()
            let store = try Encrypted.store(directory, key)
            #expect(try await store.load("github") == Encrypted.entry)
            #expect(try Encrypted.bytes(directory, "github") == Encrypted.entry)
            try await store.save(Encrypted.entry, for: "github")
            let sealed = try Encrypted.bytes(directory, "github")
            #expect(EntryEncryption.keyID(of: sealed) == key.id)
            #expect(sealed.range(of: Data(Encrypted.token.utf8)) == nil)
            #expect(try await store.load("github") == Encrypted.entry)
        }
    }

    @Test("with encryption the size limit applies to the sealed file")
    func encryptedSizeLimit() async throws {
        try await Fixture.withDirectory { _, directory in
            let store = try Encrypted.store(directory, try StoreKey.generate())
            let largest = FileSecretStore.maximumEntrySize - EntryEncryption.overhead
            try await store.save(Data(count: largest), for: "big")
            #expect(try await store.load("big")?.count == largest)
            let error = await #expect(throws: OAuthError.self) { try await store.save(Data(count: largest + 1), for: "big") }
            #expect(error?.message?.contains("the encrypted entry is \(FileSecretStore.maximumEntrySize + 1) bytes") == true)
            #expect(try await store.load("big")?.count == largest)
        }
    }
}
