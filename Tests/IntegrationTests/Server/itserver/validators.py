from oauth2_provider.oauth2_backends import OAuthLibCore
from oauth2_provider.oauth2_validators import OAuth2Validator

SESSION_MARKER = "X-IT-Session-Authenticated"


class ITOAuthLibCore(OAuthLibCore):
    """Passes "is the browser session logged in" to the validator (for prompt=none)."""

    def extract_headers(self, request):
        headers = super().extract_headers(request)
        user = getattr(request, "user", None)
        headers[SESSION_MARKER] = "1" if user is not None and user.is_authenticated else "0"
        return headers


class ITOAuth2Validator(OAuth2Validator):
    """Adds standard profile/email claims (ID token and userinfo), filtered by scope."""

    def get_additional_claims(self, request):
        user = request.user
        return {
            "preferred_username": user.get_username(),
            "name": user.get_full_name(),
            "given_name": user.first_name,
            "family_name": user.last_name,
            "email": user.email,
            "email_verified": True,
        }

    def get_discovery_claims(self, request):
        return [
            "sub",
            "preferred_username",
            "name",
            "given_name",
            "family_name",
            "email",
            "email_verified",
        ]

    # Stock DOT 3.4.1 leaves these oauthlib hooks unimplemented, so any OIDC authorization
    # request with prompt=none crashed with HTTP 500.
    def validate_silent_login(self, request):
        # Marker added by ITOAuthLibCore from the Django session (not spoofable: real HTTP
        # headers only appear as HTTP_* keys in META).
        return request.headers.get(SESSION_MARKER) == "1"

    def validate_silent_authorization(self, request):
        # Consent is always interactive on this server -> error=consent_required.
        return False
