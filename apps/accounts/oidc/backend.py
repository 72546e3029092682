"""The authentication backend of a provider's sign-in: mozilla-django-oidc's code flow, with
its endpoints from discovery and the ID token checked in full (the library checks only the
signature and the nonce)."""

from __future__ import annotations

import logging

import jwt
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from apps.accounts.oidc import discovery
from apps.accounts.oidc.accounts import SignInRefused, account_for

logger = logging.getLogger(__name__)
# Clocks of the provider and Parley may differ by this much.
LEEWAY_SECONDS = 60


class CodeRefused(Exception):
    """The provider's token endpoint would not exchange the sign-in's code."""


class ProviderBackend(OIDCAuthenticationBackend):
    def __init__(self, *args, **kwargs) -> None:
        # Not the library's: it reads every endpoint at once, and Django builds a backend for
        # each request's user; these are read from discovery only when a sign-in needs them.
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
        self.OIDC_RP_SIGN_ALGO = settings.OIDC_RP_SIGN_ALGO
        self.OIDC_RP_IDP_SIGN_KEY = None
        self.UserModel = get_user_model()

    @property
    def OIDC_OP_TOKEN_ENDPOINT(self) -> str:
        return discovery.endpoint("token_endpoint")

    @property
    def OIDC_OP_JWKS_ENDPOINT(self) -> str:
        return discovery.endpoint("jwks_uri")

    def authenticate(self, request, **kwargs):
        """The account a callback signs in to; None, with the reason kept on the request for
        the sign-in page, when anything on the way does not check out."""
        if request is None or "nonce" not in kwargs:
            return None  # a password sign-in: not this backend's
        try:
            return super().authenticate(request, **kwargs)
        except SignInRefused as exc:
            reason = exc.reason
            logger.warning("A provider sign-in was turned away: %s", exc)
        except CodeRefused as exc:  # too old, used already, or not ours
            reason = "expired"
            logger.warning("The provider refused a sign-in's code (%s)", exc)
        except (discovery.ProviderUnavailable, requests.RequestException) as exc:
            reason = "unreachable"
            logger.warning("The sign-in provider could not be reached: %s", exc)
        except jwt.InvalidAudienceError as exc:
            reason = "audience"
            logger.warning("A sign-in's ID token was not for this client: %s", exc)
        except (SuspiciousOperation, jwt.PyJWTError) as exc:
            reason = "token"
            logger.warning("A sign-in's ID token did not check out: %s", exc)
        request.parley_sign_in_refused = reason
        return None

    def raise_token_response_error(self, response) -> None:
        """The token endpoint's refusal of the code as its own error: any other HTTP error
        (the keys, userinfo) is the provider failing, not the code."""
        if response.status_code != 200:
            raise CodeRefused(f"HTTP {response.status_code}")

    def _verify_jws(self, payload, key):
        """The signature, and the claims the library leaves unchecked: issuer, audience (and
        the authorised party when there are several), expiry."""
        algorithm = jwt.get_unverified_header(payload).get("alg")
        if algorithm != self.OIDC_RP_SIGN_ALGO:
            raise SuspiciousOperation(f"ID token signed with {algorithm!r}")
        claims = jwt.decode(
            payload, key, algorithms=[algorithm], audience=self.OIDC_RP_CLIENT_ID,
            issuer=settings.PARLEY_OIDC_ISSUER, leeway=LEEWAY_SECONDS,
            options={"require": ["exp", "iat", "iss", "aud", "sub"]},
        )  # fmt: skip
        audience = claims["aud"]
        several = isinstance(audience, list) and len(audience) > 1
        if several and claims.get("azp") != self.OIDC_RP_CLIENT_ID:
            raise jwt.InvalidAudienceError("several audiences, and another party authorised")
        return claims

    def get_or_create_user(self, access_token, id_token, payload):
        claims = dict(payload)
        userinfo_endpoint = discovery.document().get("userinfo_endpoint")
        if userinfo_endpoint:
            self.OIDC_OP_USER_ENDPOINT = userinfo_endpoint
            info = self.get_userinfo(access_token, id_token, payload)
            if info.get("sub") != payload["sub"]:
                raise SignInRefused("token", "userinfo is about another subject")
            claims.update({k: v for k, v in info.items() if k not in ("iss", "aud")})
        return account_for(issuer=settings.PARLEY_OIDC_ISSUER, claims=claims)

    def get_user(self, user_id):
        """A session's person, while their account is active (the library's skips that)."""
        user = self.UserModel._default_manager.filter(pk=user_id, is_active=True).first()
        return user
