"""Discovery documents that also advertise the endpoints stock DOT 3.4.1 leaves out.

Stock DOT publishes no `device_authorization_endpoint` in either metadata document, and
no revocation/introspection endpoints in the OIDC one. The wrappers add them (only
when missing), so clients can be tested against fully discovery-driven flows.
"""

import json

from django.http import JsonResponse
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
