import OAuthFlow
print("authflow: not yet")
