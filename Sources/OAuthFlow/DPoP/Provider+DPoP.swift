#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension Provider {
    /// The algorithm DPoP proofs are signed with: ``Settings/dpopAlgorithm``, else the ``ClientKey``'s
    /// default when ``Settings/dpopKey`` is one, else ES256.
    public var effectiveDPoPAlgorithm: SigningAlgorithm {
        if let dpopAlgorithm = self.dpopAlgorithm { return dpopAlgorithm }
        if let key = self.dpopKey as? ClientKey { return key.defaultAlgorithm }
        return .es256
    }

    /// The DPoP rules: an algorithm of ES256, ES384, EdDSA, PS256 or RS256 that fits a
    /// ``ClientKey``; `dpopAlgorithm` and `dpopKey` only with DPoP on.
    func validateDPoP(_ fail: (String, String) -> OAuthError) throws(OAuthError) {
        guard self.dpop != .off else {
            if self.dpopAlgorithm != nil { throw fail("dpopAlgorithm", "is used only with \"dpop\": true or \"required\"") }
            if self.dpopKey != nil { throw fail("dpopKey", "is used only with \"dpop\": true or \"required\"") }
            return
        }
        let algorithm = effectiveDPoPAlgorithm
        guard DPoPProof.algorithms.contains(algorithm) else {
            throw fail("dpopAlgorithm", "must be one of " + DPoPProof.algorithms.map(\.rawValue).joined(separator: ", ") + " (RFC 9449 §4.2: asymmetric)")
        }
        if let key = self.dpopKey as? ClientKey, !key.supports(algorithm) {
            throw fail("dpopAlgorithm", "\(algorithm.rawValue) does not fit the \(key.kind) DPoP key")
        }
    }
}

extension ProviderCatalog.Entry {
    /// Reads `dpop` (`true`, `false` or `"required"`) and `dpopAlgorithm` into `provider`.
    func readDPoP(into provider: inout Provider) throws(OAuthError) {
        switch value("dpop") {
        case nil, .bool(false)?: provider.dpop = .off
        case .bool(true)?: provider.dpop = .enabled
        case .string("required")?: provider.dpop = .required
        default: throw fail("dpop", "must be true, false or \"required\"")
        }
        if let name = try string("dpopAlgorithm") {
            guard let algorithm = SigningAlgorithm(rawValue: name), DPoPProof.algorithms.contains(algorithm) else {
                throw fail("dpopAlgorithm", "must be one of " + DPoPProof.algorithms.map(\.rawValue).joined(separator: ", "))
            }
            provider.dpopAlgorithm = algorithm
        }
    }
}
