"""Discovery documents that also advertise the endpoints stock DOT 3.4.1 leaves out.

Stock DOT publishes no `device_authorization_endpoint` in either metadata document, and
no revocation/introspection endpoints in the OIDC one. The wrappers add them (only
when missing), so clients can be tested against fully discovery-driven flows.
"""

import json

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.http import HttpResponseNotAllowed, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from jwcrypto.jwk import JWK
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.views import ConnectDiscoveryInfoView, OAuthServerMetadataView

AUTH_METHODS = ["client_secret_post", "client_secret_basic"]


def _augment(view, request, response):
    if response.status_code != 200:
        return response
    data = json.loads(response.content)
    extra = {
        "device_authorization_endpoint": view._get_endpoint_url(request, "device-authorization"),
        "revocation_endpoint": view._get_endpoint_url(request, "revoke-token"),
        "introspection_endpoint": view._get_endpoint_url(request, "introspect"),
        "revocation_endpoint_auth_methods_supported": AUTH_METHODS,
        "introspection_endpoint_auth_methods_supported": AUTH_METHODS,
    }
    for key, value in extra.items():
        if value is not None:
            data.setdefault(key, value)
    grant_types = data.get("grant_types_supported")
    if grant_types is None:
        data["grant_types_supported"] = [
            "authorization_code",
            "client_credentials",
            "refresh_token",
            "urn:ietf:params:oauth:grant-type:device_code",
        ]
    new = JsonResponse(data, status=response.status_code)
    for header in ("Access-Control-Allow-Origin", "Cache-Control"):
        if header in response:
            new[header] = response[header]
    return new


class ITConnectDiscoveryInfoView(ConnectDiscoveryInfoView):
    def get(self, request, *args, **kwargs):
        return _augment(self, request, super().get(request, *args, **kwargs))


class ITOAuthServerMetadataView(OAuthServerMetadataView):
    def get(self, request, *args, **kwargs):
        return _augment(self, request, super().get(request, *args, **kwargs))


@csrf_exempt
def rotate_signing_key(request):
    """Test-only key rotation: a fresh 2048-bit RSA key signs every ID token from now on, and the
    JWKS lists only it (the old key is dropped, as after a compromise). In memory only: a restart
    goes back to the key file. Answers {"kid": <new thumbprint>, "previous_kid": <old one>}."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    previous = JWK.from_pem(oauth2_settings.OIDC_RSA_PRIVATE_KEY.encode()).thumbprint()
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    # oauth2_settings caches attributes on first read; setting the attribute replaces the cached value.
    oauth2_settings.OIDC_RSA_PRIVATE_KEY = pem
    oauth2_settings.OIDC_RSA_PRIVATE_KEYS_INACTIVE = []
    return JsonResponse({"kid": JWK.from_pem(pem.encode()).thumbprint(), "previous_kid": previous})
