import os

from django.contrib.auth import views as auth_views
from django.http import HttpResponse
from django.urls import include, path, re_path

from itserver.views import ITConnectDiscoveryInfoView, ITOAuthServerMetadataView, rotate_signing_key


def instance(request):
    # Lets start.sh check that the process answering on the port is the one it started.
    return HttpResponse(os.environ.get("OAUTHFLOW_IT_INSTANCE", "") + "\n", content_type="text/plain")


def index(request):
    return HttpResponse("OAuthFlow integration-test authorization server; issuer /o\n", content_type="text/plain")


def profile(request):
    # Landing page after a login without `next`; lets a browser check its session.
    user = request.user.get_username() if request.user.is_authenticated else ""
    return HttpResponse(f"logged in as: {user}\n", content_type="text/plain")


urlpatterns = [
    path("", index),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/profile/", profile, name="profile"),
    path("it/instance", instance),
    # Test-only: replaces the RS256 signing key in this process (the JWKS then lists only the new one).
    path("it/rotate-signing-key", rotate_signing_key),
    # Discovery documents (see itserver/views.py); listed before the DOT include so they win.
    re_path(r"^o/\.well-known/openid-configuration/?$", ITConnectDiscoveryInfoView.as_view()),
    path("o/.well-known/oauth-authorization-server", ITOAuthServerMetadataView.as_view()),
    # RFC 8414 path-component form for the issuer http://127.0.0.1:PORT/o.
    path(".well-known/oauth-authorization-server/o", ITOAuthServerMetadataView.as_view()),
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
]
