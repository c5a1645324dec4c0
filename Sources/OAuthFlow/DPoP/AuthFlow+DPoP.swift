#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

extension ErrorResponse.Code {
    /// `use_dpop_nonce`: send the request again with the `DPoP-Nonce` the server gave (RFC 9449 §8, §9).
    public static let useDPoPNonce = ErrorResponse.Code(rawValue: "use_dpop_nonce")
    /// `invalid_dpop_proof`: the DPoP proof was refused (RFC 9449 §5, §7.1).
    public static let invalidDPoPProof = ErrorResponse.Code(rawValue: "invalid_dpop_proof")
}

/// The DPoP key a provider's client uses until its tokens are stored with it: made on first use,
/// forgotten by a logout. One per ``EndpointClient``.
final class DPoPKeySlot: Sendable {
    private let key = Mutex<DPoPKey?>(nil)

    /// The key held, when it signs with `algorithm`.
    func current(_ algorithm: SigningAlgorithm) -> DPoPKey? {
        key.withLock { $0?.algorithm == algorithm ? $0 : nil }
    }

    /// Holds `new` (the key of the stored tokens, or a fresh one).
    func hold(_ new: DPoPKey) { key.withLock { $0 = new } }

    /// Forgets the key (a logout).
    func forget() { key.withLock { $0 = nil } }
}

extension AuthFlow {
    /// The prover of `provider`'s DPoP proofs, or nil when the provider does not use DPoP.
    ///
    /// The key is ``Provider/dpopKey`` when set; else the key kept with the provider's tokens
    /// (`previous`, then the cached set), else the one made earlier in this process, else a new
    /// one. The algorithm must be one the server's `dpop_signing_alg_values_supported` lists,
    /// when its metadata has that member (RFC 9449 §5.1).
    /// - Throws: ``OAuthError`` `.configuration` for an algorithm the server does not list,
    ///   before anything is sent to the token endpoint; `.crypto` when no key can be made.
    func dpopProver(for provider: Provider, previous: TokenSet? = nil) async throws(OAuthError) -> DPoPProver? {
        guard provider.dpop != .off else { return nil }
        let algorithm = provider.effectiveDPoPAlgorithm
        try await checkDPoPAlgorithm(algorithm, for: provider)
        if let signer = provider.dpopKey { return try DPoPProver(signer: signer, algorithm: algorithm) }
        let slot = client(for: provider).dpopKeySlot
        for candidate in [previous?.dpopKey, tokens[provider.id]?.dpopKey, slot.current(algorithm)] {
            if let key = candidate, key.algorithm == algorithm {
                slot.hold(key)
                return DPoPProver(key)
            }
        }
        let key = try DPoPKey.generate(algorithm)
        slot.hold(key)
        logger.debug(provider, "made a DPoP key (\(algorithm.rawValue))")
        return DPoPProver(key)
    }

    /// `.configuration` when the provider's discovered metadata lists
    /// `dpop_signing_alg_values_supported` without `algorithm`; nothing when it lists none (or
    /// the provider has no issuer, or discovery fails: the token request then says what is wrong).
    private func checkDPoPAlgorithm(_ algorithm: SigningAlgorithm, for provider: Provider) async throws(OAuthError) {
        guard provider.issuer != nil else { return }
        let metadata: ProviderMetadata
        do { metadata = try await discoveredMetadata(for: provider) } catch { return }
        guard case .array(let values)? = metadata.document["dpop_signing_alg_values_supported"] else { return }
        let names = values.compactMap(\.stringValue)
        guard names.contains(algorithm.rawValue) else {
            throw OAuthError(.configuration, providerID: provider.id, endpoint: .token, message: """
                the DPoP algorithm \(algorithm.rawValue) is not in the server's dpop_signing_alg_values_supported \
                (\(names.prefix(8).map { DisplayText.escape(String($0.prefix(16))) }.joined(separator: ", "))); set dpopAlgorithm to one of them
                """)
        }
    }

    /// The authorization request's parameters with `dpop_jkt` (RFC 9449 §10), the thumbprint of
    /// the key the code exchange will prove, for a DPoP provider.
    /// - Throws: what ``dpopProver(for:previous:)`` throws.
    func addingDPoPThumbprint(_ parameters: [String: String], for provider: Provider) async throws(OAuthError) -> [String: String] {
        guard let prover = try await dpopProver(for: provider) else { return parameters }
        var parameters = parameters
        parameters["dpop_jkt"] = prover.thumbprint
        return parameters
    }
}
