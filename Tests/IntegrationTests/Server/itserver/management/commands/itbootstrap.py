"""Creates (or resets) the integration-test user and OAuth applications. Idempotent."""

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction
from oauth2_provider.models import get_application_model

USERNAME = "alice"
PASSWORD = "wonderland-pass-1"

Application = get_application_model()

APPLICATIONS = [
    {
        "client_id": "it-public-pkce",
        "name": "OAuthFlow IT public PKCE client",
        "client_type": Application.CLIENT_PUBLIC,
        "authorization_grant_type": Application.GRANT_AUTHORIZATION_CODE,
        "client_secret": "",
        "redirect_uris": "http://127.0.0.1:8911/callback http://127.0.0.1/callback",
        "post_logout_redirect_uris": "http://127.0.0.1:8911/logged-out",
        "algorithm": Application.RS256_ALGORITHM,
        "skip_authorization": False,
    },
    {
        "client_id": "it-public-device",
        "name": "OAuthFlow IT public device client",
        "client_type": Application.CLIENT_PUBLIC,
        "authorization_grant_type": Application.GRANT_DEVICE_CODE,
        "client_secret": "",
        "redirect_uris": "",
        "algorithm": Application.RS256_ALGORITHM,
        "skip_authorization": False,
    },
    {
        "client_id": "it-confidential-cc",
        "name": "OAuthFlow IT confidential client-credentials client",
        "client_type": Application.CLIENT_CONFIDENTIAL,
        "authorization_grant_type": Application.GRANT_CLIENT_CREDENTIALS,
        "client_secret": "it-cc-secret-1",
        "redirect_uris": "",
        "algorithm": Application.NO_ALGORITHM,
        "skip_authorization": False,
    },
    {
        "client_id": "it-confidential-web",
        "name": "OAuthFlow IT confidential web client",
        "client_type": Application.CLIENT_CONFIDENTIAL,
        "authorization_grant_type": Application.GRANT_AUTHORIZATION_CODE,
        "client_secret": "it-web-secret-1",
        "redirect_uris": "http://127.0.0.1:8912/callback",
        "post_logout_redirect_uris": "http://127.0.0.1:8912/logged-out",
        "algorithm": Application.RS256_ALGORITHM,
        "skip_authorization": False,
    },
]


class Command(BaseCommand):
    help = "Create/reset the OAuthFlow integration-test user and applications."

    @transaction.atomic
    def handle(self, *args, **options):
        User = get_user_model()
        user, _ = User.objects.get_or_create(username=USERNAME)
        user.first_name = "Alice"
        user.last_name = "Liddell"
        user.email = "alice@example.com"
        user.is_active = True
        user.set_password(PASSWORD)
        user.save()

        for spec in APPLICATIONS:
            app = Application.objects.filter(client_id=spec["client_id"]).first() or Application(
                client_id=spec["client_id"]
            )
            for key, value in spec.items():
                setattr(app, key, value)
            if app.client_type == Application.CLIENT_PUBLIC:
                # Never an empty secret: DOT compares the body's missing/empty client_secret
                # against the stored one, so "" would let anyone "authenticate" as a public
                # client on the introspection endpoint. Public clients never send this one.
                app.client_secret = secrets.token_urlsafe(32)
            app.user = user
            # Stored hashed (DOT default); the plaintext fixed secret authenticates via check_password.
            app.hash_client_secret = True
            app.post_logout_redirect_uris = spec.get("post_logout_redirect_uris", "")
            app.full_clean(validate_unique=False)
            app.save()
            self.stdout.write(f"application {spec['client_id']} ready")
        self.stdout.write(f"user {USERNAME} ready")
