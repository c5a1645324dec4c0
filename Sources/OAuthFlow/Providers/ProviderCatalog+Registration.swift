#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension ProviderCatalog.Entry {
    /// `registration` and `initialAccessTokenFile`: `"dynamic"` makes the provider register its
    /// client (RFC 7591) instead of naming a `clientID`; a `clientAuthentication` written beside it
    /// is the method to register, and the token file's content is presented at registration.
    func readRegistration(into provider: inout Provider) throws(OAuthError) {
        let tokenFile = try string("initialAccessTokenFile")
        switch try string("registration") {
        case nil, "manual"?:
            if tokenFile != nil { throw fail("initialAccessTokenFile", "is read only with \"registration\": \"dynamic\"") }
            return
        case "dynamic"?:
            break
        default:
            throw fail("registration", "must be \"dynamic\" or \"manual\"")
        }
        if value("clientID") != nil {
            throw fail("registration", "\"dynamic\" takes the client ID from the server's answer; remove clientID, or this key")
        }
        var settings = Provider.DynamicRegistration()
        if value("clientAuthentication") != nil { settings.authentication = provider.clientAuthentication }
        if let tokenFile { settings.initialAccessToken = try secretFile(tokenFile, key: "initialAccessTokenFile") }
        provider.dynamicRegistration = settings
    }
}
