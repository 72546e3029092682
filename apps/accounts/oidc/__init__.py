"""Sign-in through a team's OpenID Connect provider, on mozilla-django-oidc's code flow
(PKCE, state and nonce): its endpoints from the issuer's discovery document, the ID token
checked for issuer, audience and expiry as well as signature and nonce, and each account
linked to the provider's subject once matched by a verified e-mail."""
