"""Django settings of the OAuthFlow loopback integration-test authorization server.

Test-only configuration: never expose this server beyond 127.0.0.1.

Environment:
  OAUTHFLOW_IT_HOME             state directory (DB, keys, logs); default /tmp/oauthflow-it
  OAUTHFLOW_IT_PORT             listening port, used to build the issuer URL; default 8910
  OAUTHFLOW_IT_DEVICE_INTERVAL  polling interval (s) announced by the device endpoint; default 1
  OAUTHFLOW_IT_AUTHZ_ISS        "1" (default) adds RFC 9207 `iss` to authorization responses
"""

import os
from pathlib import Path

from itserver.pkce import pkce_required

IT_HOME = Path(os.environ.get("OAUTHFLOW_IT_HOME", "/tmp/oauthflow-it"))
IT_PORT = int(os.environ.get("OAUTHFLOW_IT_PORT", "8910"))
BASE_URL = f"http://127.0.0.1:{IT_PORT}"
ISSUER = f"{BASE_URL}/o"


def _read_state_file(name):
    path = IT_HOME / name
    try:
        return path.read_text()
    except FileNotFoundError:
        # Only happens before setup.sh has generated the file (e.g. during `migrate`).
        return ""


SECRET_KEY = _read_state_file("django-secret-key").strip() or "oauthflow-it-bootstrap-only"
OIDC_RSA_PRIVATE_KEY = _read_state_file("oidc-rs256.pem")

DEBUG = os.environ.get("OAUTHFLOW_IT_DEBUG", "0") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
# Missing trailing slashes give a plain 404 instead of a redirect that would turn
# a POST into a GET (the DOT endpoints all end with "/").
APPEND_SLASH = False

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.staticfiles",
    "oauth2_provider",
    "itserver",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]

ROOT_URLCONF = "itserver.urls"
WSGI_APPLICATION = "itserver.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [Path(__file__).resolve().parent / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
            ],
        },
    },
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": IT_HOME / "db.sqlite3",
        # Concurrent test clients hit a multi-threaded server: WAL + IMMEDIATE transactions
        # avoid "database is locked" on read->write lock upgrades.
        "OPTIONS": {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
    }
}

# Fast hashing: this server only holds throw-away test credentials, and logins /
# client authentications happen many times per test run.
PASSWORD_HASHERS = ["itserver.hashers.FastPBKDF2PasswordHasher"]
AUTH_PASSWORD_VALIDATORS = []

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/accounts/profile/"

SESSION_COOKIE_NAME = "sessionid"
CSRF_COOKIE_NAME = "csrftoken"
CSRF_TRUSTED_ORIGINS = [BASE_URL, f"http://localhost:{IT_PORT}"]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": OIDC_RSA_PRIVATE_KEY,
    "OIDC_ISS_ENDPOINT": ISSUER,
    "SCOPES": {
        "openid": "OpenID Connect",
        "profile": "Basic profile",
        "email": "Email address",
        "read": "Reading scope",
        "write": "Writing scope",
        "introspection": "Introspect tokens",
    },
    # Used when a request carries no `scope` (client credentials, device, authorize).
    "DEFAULT_SCOPES": ["read"],
    "ACCESS_TOKEN_EXPIRE_SECONDS": 3600,
    "ID_TOKEN_EXPIRE_SECONDS": 3600,
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": 120,
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_GRACE_PERIOD_SECONDS": 0,
    "PKCE_REQUIRED": pkce_required,  # True for public clients, optional for confidential ones
    "ALLOWED_REDIRECT_URI_SCHEMES": ["http", "https"],
    "OAUTH2_VALIDATOR_CLASS": "itserver.validators.ITOAuth2Validator",
    "OAUTH2_BACKEND_CLASS": "itserver.validators.ITOAuthLibCore",
    "OAUTH_DEVICE_VERIFICATION_URI": f"{ISSUER}/device/",
    "OAUTH_DEVICE_VERIFICATION_URI_COMPLETE": f"{ISSUER}/device/?user_code={{user_code}}",
    "DEVICE_FLOW_INTERVAL": int(os.environ.get("OAUTHFLOW_IT_DEVICE_INTERVAL", "1")),
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": os.environ.get("OAUTHFLOW_IT_AUTHZ_ISS", "1") == "1",
    "OIDC_RP_INITIATED_LOGOUT_ENABLED": True,
    "OIDC_RP_INITIATED_LOGOUT_ALWAYS_PROMPT": False,
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "django": {"handlers": ["stderr"], "level": "INFO"},
        "oauth2_provider": {"handlers": ["stderr"], "level": "WARNING"},
        "oauthlib": {"handlers": ["stderr"], "level": "WARNING"},
    },
}
