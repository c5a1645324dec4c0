import OAuthFlow
