#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
import OAuthFlow

/// What kubectl asks an exec credential plugin for, in `KUBERNETES_EXEC_INFO` (client-go's
/// `ExecCredential` with an empty status; Kubernetes "client-go credential plugins").
struct KubeExecInfo: Equatable {
    /// `client.authentication.k8s.io/v1`, the default.
    static let v1 = "client.authentication.k8s.io/v1"
    /// `client.authentication.k8s.io/v1beta1`, what kubectl before 1.22 asks for.
    static let v1beta1 = "client.authentication.k8s.io/v1beta1"

    /// The apiVersion to answer in.
    var apiVersion: String
    /// `spec.interactive`; nil when kubectl did not say (before 1.22).
    var interactive: Bool?

    /// Reads `KUBERNETES_EXEC_INFO`; nil or empty asks for v1.
    /// - Throws: ``CLIError/data(_:)`` for JSON that is not an ExecCredential or an apiVersion other than v1 and v1beta1.
    init(_ text: String?) throws(CLIError) {
        guard let text, !text.isEmpty else {
            self.apiVersion = Self.v1
            return
        }
        let document: JSONValue
        do { document = try JSONValue.parse(Data(text.utf8)) } catch {
            throw .data("KUBERNETES_EXEC_INFO is not JSON: \(error.message ?? error.description)")
        }
        guard case .object = document, document["kind"]?.stringValue.map({ $0 == "ExecCredential" }) ?? true else {
            throw .data("KUBERNETES_EXEC_INFO is not an ExecCredential")
        }
        let asked = document["apiVersion"]?.stringValue ?? Self.v1
        guard asked == Self.v1 || asked == Self.v1beta1 else {
            throw .data("kubectl asks for \(escaped(String(asked.prefix(80)))); authflow answers \(Self.v1) and \(Self.v1beta1)")
        }
        apiVersion = asked
        interactive = document["spec"]?["interactive"]?.boolValue
    }
}

extension Context {
    /// `authflow kube-credential PROVIDER`: an `ExecCredential` on stdout with `status.token` and,
    /// when the token has an expiry, `status.expirationTimestamp` (RFC 3339, UTC).
    ///
    /// With nothing stored for a grant a person logs in to, it logs in on the terminal only when
    /// kubectl says `interactive: true` (or, from a kubectl that does not say, when stdin and
    /// stderr are terminals); otherwise one line naming `authflow login` and exit 77. A grant no
    /// person logs in to fetches its token on demand.
    func kubeCredential(_ id: String) async throws(CLIError) -> ExitCode {
        let info = try KubeExecInfo(environment["KUBERNETES_EXEC_INFO"])
        let provider = try provider(id)
        let store = try store()
        let flow = try await flow([provider], store: store)
        let interactive = info.interactive ?? (isatty(0) == 1 && output.stderrIsTerminal)
        guard let set = try await validTokenSet(provider, flow: flow, store: store, interactive: interactive) else { return .denied }
        var status: [String: JSONValue] = ["token": .string(set.accessToken.reveal())]
        if let expiresAt = set.expiresAt { status["expirationTimestamp"] = .date(expiresAt) }
        out.write(JSONValue.line([
            ("apiVersion", .string(info.apiVersion)),
            ("kind", .string("ExecCredential")),
            ("status", .object(status)),
        ]))
        return .success
    }
}
