import OAuthFlow
print("oauthflow-bench: not yet")
