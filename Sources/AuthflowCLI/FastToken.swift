#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import OAuthFlow

/// `authflow token PROVIDER` answered straight from the file store, before any task, actor or
/// flow exists: the command scripts run on every `curl` and `git` call.
///
/// It prints exactly what the full path (``Context/token(_:json:)``) prints for a fresh token in
/// a plaintext file store, and it gives up (returns nil, having printed nothing) in every other
/// case, so that path runs as before and reports whatever is wrong. What it keeps of the full path:
///
/// - the catalog: the same file (`--config`, `AUTHFLOW_CONFIG`, XDG, `HOME`), loaded the same way
///   (strict unless `AUTHFLOW_CATALOG_STRICT=0`, only this provider's secret resolved, the entry
///   validated); a missing file, an error or an unknown id gives up;
/// - the store: the same directory (`--store`, `AUTHFLOW_STORE`, XDG, `HOME`) opened by
///   ``FileSecretStore`` itself, so its directory checks (owner, mode 0700, not a symbolic link)
///   and its entry checks (`O_NOFOLLOW`, `O_NONBLOCK`, regular file, owner, mode 0600, size) are
///   the ones every command runs; a missing entry, or one that fails a check, gives up;
/// - the entry: decoded by the library as a flow restores it (version, provider id, every
///   token's syntax), fresh by the rule of ``AuthFlow/tokenSet(for:)`` (expiry minus the 60 s
///   margin, capped at a third of the lifetime) at ``Authflow/Services/now``; the printed token is
///   checked once more for bytes a header cannot carry.
///
/// It never runs for `--json`, a `postgresql://` store, a store key (`--store-key-file`,
/// `AUTHFLOW_STORE_KEY_FILE`, `--store-previous-key-file`), `--store-plaintext`, `AUTHFLOW_DEBUG`
/// or a provider with `"debug": true` (whose log lines only a flow writes).
///
/// Like a flow's restore, it lists the store directory first and reads the entry only when the
/// listing has it. What it skips: the flow itself, its state stream (nobody subscribes in a CLI
/// process) and the HTTP transport (nothing is sent for a fresh token).
extension Authflow {
    /// Answers `authflow token PROVIDER` from a fresh token in a plaintext file store.
    ///
    /// ``start()`` and ``run(arguments:output:environment:services:)`` call it before the full
    /// path; nothing else needs to.
    /// - Returns: `.success` after printing the token and a newline on `output.stdout`; nil, with
    ///   nothing printed, when the full path must run (see above).
    public static func tokenFromStore(
        _ invocation: Invocation, output: Output, environment: [String: String], services: Services
    ) -> ExitCode? {
        guard case .token(let id, json: false) = invocation.command,
              let set = freshSetFromStore(id, invocation: invocation, output: output, environment: environment, services: services)
        else { return nil }
        output.stdout.write(set.accessToken.reveal() + "\n")
        return .success
    }

    /// `id`'s fresh, header-safe token set from a plaintext file store, read as described above
    /// (the conditions on the invocation and the environment, the catalog, the store and the
    /// entry), with nothing printed; nil when the full path must run. `exec` and
    /// `docker-credential` read it as `token` does.
    static func freshSetFromStore(
        _ id: String, invocation: Invocation, output: Output, environment: [String: String], services: Services
    ) -> TokenSet? {
        guard invocation.storeKeyPath == nil, invocation.previousStoreKeyPaths.isEmpty, !invocation.storePlaintext,
              (environment["AUTHFLOW_STORE_KEY_FILE"] ?? "").isEmpty
        else { return nil }
        let context = Context(invocation: invocation, output: output, environment: environment, services: services)
        guard !context.debugFromEnvironment, context.databaseStore() == nil else { return nil }
        // Any error (CLIError from the catalog, OAuthError from the store) means: let the full path report it.
        do {
            let provider = try context.provider(id)
            guard !provider.debug else { return nil }
            let store = try FileSecretStore(directory: try context.storeURL(), environment: environment,
                                            lockTimeout: services.lockTimeout, encryption: nil)
            // A flow restores only the entries the directory lists (and fails when it cannot be listed).
            guard try store.keysSynchronously().contains(id),
                  let data = try store.loadSynchronously(id),
                  let set = try AuthFlow.freshStoredSet(data, key: id, now: services.now()),
                  Context.isHeaderSafe(set.accessToken)
            else { return nil }
            return set
        } catch {
            return nil
        }
    }
}
