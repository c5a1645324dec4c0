#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How this client proves who it is to the endpoints that authenticate it (RFC 6749 §2.3): the
/// token endpoint for every grant, device authorization (RFC 8628 §3.1), revocation (RFC 7009
/// §2.1), introspection (RFC 7662 §2.1) and pushed authorization (RFC 9126 §2.1).
///
/// The method the provider's registration names is ``Provider/ClientAuthentication`` (public, a
/// catalog setting); this is what applies it: made once per provider when the flow is made
/// (``init(_:)``: providers never change after that), held by the provider's ``EndpointClient``,
/// and applied by it to every form POST that authenticates the client (``apply(to:)``) — one step
/// of every such request, never re-derived per call, never known to a grant.
///
/// `private_key_jwt` and `client_secret_jwt` sign a fresh assertion for each request here
/// (``AssertionAuthenticator``, RFC 7523 §2.2), with the request's URL as `aud` by default. The
/// mutual-TLS methods (RFC 8705 §2) send `client_id` in the body; the certificate is presented by
/// the provider's transport (Credentials/ProviderTransport.swift). A DPoP proof (RFC 9449) is the
/// step after this one, added by ``EndpointClient/post(_:to:endpoint:retrying:proof:)``.
///
/// No case prints a secret: ``Secret`` shows `<redacted>` in `description` and `dump`.
enum ClientAuthenticator: Sendable {
    /// A public client (`none`): `client_id` in the body, no secret (RFC 6749 §2.1, §3.2.1).
    /// Not called `none`, which an optional would take for `Optional.none`.
    case publicClient
    /// HTTP Basic (RFC 6749 §2.3.1): the ready `Authorization` header value, made once.
    case secretBasic(Secret)
    /// `client_id` and `client_secret` in the body (RFC 6749 §2.3.1): the secret.
    case secretPost(Secret)
    /// `private_key_jwt` or `client_secret_jwt`: `client_id`, `client_assertion_type` and a fresh
    /// `client_assertion` in the body (RFC 7521 §4.2, RFC 7523 §2.2, OpenID Connect Core §9).
    case assertion(AssertionAuthenticator)
    /// `private_key_jwt` with an assertion made elsewhere (``Provider/Settings/clientAssertionFile``): the
    /// file read on every request (the platform rewrites it), its token checked (visible ASCII,
    /// trailing newline dropped, a JWT's `exp` not passed) and sent as `client_assertion` with
    /// `client_id` and `client_assertion_type` (RFC 7521 §4.2, RFC 7523 §2.2).
    case assertionFile(SubjectTokenSource, providerID: String)
    /// No client authentication and no `client_id`: an `external_account` file without
    /// `client_id`, whose token endpoint (Google's STS) knows the caller by the subject token alone.
    case anonymous
    /// `tls_client_auth` or `self_signed_tls_client_auth`: `client_id` in the body; the transport
    /// presents the certificate (RFC 8705 §2).
    case mutualTLS(Provider.ClientAuthentication)
    /// A provider whose method cannot be made (``Provider/validate()`` refuses such providers
    /// first): every request fails with this error before anything is sent.
    case unusable(OAuthError)

    /// The authentication `provider`'s registration says (``Provider/Settings/clientAuthentication``).
    init(_ provider: Provider) {
        if provider.clientAuthentication == .privateKeyJWT, let path = provider.clientAssertionFile {
            self = .assertionFile(SubjectTokenSource(.file(path: path, jsonField: nil), noun: "client assertion"), providerID: provider.id)
            return
        }
        if provider.sendsNoClientID {
            self = .anonymous
            return
        }
        switch provider.clientAuthentication {
        case .clientSecretBasic:
            self = .secretBasic(Secret(Self.basicAuthorization(clientID: provider.clientID, secret: provider.clientSecret)))
        case .clientSecretPost:
            self = .secretPost(provider.clientSecret ?? Secret(""))
        case .none:
            self = .publicClient
        case .privateKeyJWT, .clientSecretJWT:
            do {
                if let authenticator = try AssertionAuthenticator(provider: provider) {
                    self = .assertion(authenticator)
                } else {
                    self = .unusable(OAuthError(.configuration, providerID: provider.id, message: "no assertion method"))
                }
            } catch {
                self = .unusable(error)
            }
        case .tlsClientAuth, .selfSignedTLSClientAuth:
            self = .mutualTLS(provider.clientAuthentication)
        }
    }

    /// `Basic` and the base64 of the form-encoded client id and secret joined by `:` (RFC 6749 §2.3.1).
    static func basicAuthorization(clientID: String, secret: Secret?) -> String {
        let credentials = FormEncoding.escape(clientID) + ":" + FormEncoding.escape(secret?.reveal() ?? "")
        return "Basic " + Data(utf8Of: credentials).base64EncodedString()
    }

    /// Puts the client's authentication on `post`, a form POST about to be sent to `post.url`.
    /// - Throws: ``OAuthError`` as the assertion's signer throws (`.configuration`, `.crypto`), or
    ///   the error of an ``unusable(_:)`` method.
    func apply(to post: inout FormPost) async throws(OAuthError) {
        switch self {
        case .publicClient:
            post.fields.append(("client_id", post.clientID))
        case .secretBasic(let value):
            post.headers.append(("Authorization", value.reveal()))
        case .secretPost(let secret):
            post.fields.append(("client_id", post.clientID))
            post.fields.append(("client_secret", secret.reveal()))
        case .assertion(let authenticator):
            post.fields += try await authenticator.fields(endpoint: post.url, now: Date())
        case .assertionFile(let file, let providerID):
            let context = SubjectTokenSource.Context(providerID: providerID, tokenType: TokenType.jwt, transport: nil, userAgent: "", now: Date())
            post.fields += ClientAssertion.formFields(clientID: post.clientID, assertion: try await file.token(context))
        case .anonymous:
            break
        case .mutualTLS:
            post.fields.append(("client_id", post.clientID))
        case .unusable(let error):
            throw error
        }
    }

    /// The name a debug log shows: the method, never a value.
    var name: String {
        switch self {
        case .publicClient: "none"
        case .secretBasic: "client_secret_basic"
        case .secretPost: "client_secret_post"
        case .assertion(let authenticator): authenticator.algorithm.isHMAC ? "client_secret_jwt" : "private_key_jwt"
        case .assertionFile: "private_key_jwt (client assertion file)"
        case .anonymous: "none (no client_id)"
        case .mutualTLS(let method): method.rawValue
        case .unusable: "unusable"
        }
    }
}

/// A form POST being built (``EndpointClient/formRequest(url:fields:)``), before it
/// becomes an ``HTTPRequest``: what a client authentication step may add to.
struct FormPost: Sendable {
    /// Where it goes (an assertion's `aud`).
    let url: URL
    /// The client's id, for the methods that send it in the body.
    let clientID: String
    /// The form fields, in order.
    var fields: [(String, String)]
    /// The header fields, in order.
    var headers: [(name: String, value: String)]
}
