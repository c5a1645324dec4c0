from django.contrib.auth.hashers import PBKDF2PasswordHasher


class FastPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    """PBKDF2 with a low work factor. Test server only (throw-away credentials)."""

    algorithm = "pbkdf2_sha256_fast"
    iterations = 1000
