"""Ask the provider again, silently, once a provider session's check is older than
PARLEY_OIDC_RECHECK_SECONDS: a person the provider has disabled or signed out is signed out
here at their next page."""

from __future__ import annotations

import logging

from django.conf import settings
from django.urls import reverse
from django.utils.functional import cached_property
from mozilla_django_oidc.middleware import SessionRefresh

from apps.accounts.oidc import discovery

logger = logging.getLogger(__name__)


class ProviderRecheck(SessionRefresh):
    def __init__(self, get_response) -> None:
        super(SessionRefresh, self).__init__(get_response)  # not the library's: no endpoint yet
        self.OIDC_EXEMPT_URLS: list = []
        self.OIDC_STATE_SIZE = self.OIDC_NONCE_SIZE = 32
        self.OIDC_USE_NONCE = True
        self.OIDC_AUTHENTICATION_CALLBACK_URL = "oidc_callback"

    @property
    def OIDC_RP_CLIENT_ID(self) -> str:
        return settings.OIDC_RP_CLIENT_ID

    @property
    def OIDC_RP_SCOPES(self) -> str:
        return settings.OIDC_RP_SCOPES

    async def __acall__(self, request):
        # Under daphne the chain is async, and the library's process_request would cost a
        # thread hop per request: none at all while no provider is set.
        if not settings.PARLEY_OIDC_ISSUER:
            return await self.get_response(request)
        return await super().__acall__(request)

    @cached_property
    def exempt_urls(self) -> set[str]:
        return {reverse(name) for name in ("oidc_start", "oidc_callback", "logout", "login")}

    def is_refreshable_url(self, request) -> bool:
        # Only a page the browser navigates to: a partial htmx fetches, a file, a stream or an
        # API call cannot follow a redirect to the provider.
        navigation = request.headers.get("Sec-Fetch-Mode", "navigate") == "navigate"
        page = "text/html" in request.headers.get("Accept", "")
        return (
            navigation and page and not request.headers.get("HX-Request")
            and super().is_refreshable_url(request)
        )  # fmt: skip

    def process_request(self, request):
        if not settings.PARLEY_OIDC_ISSUER or not self.is_refreshable_url(request):
            return None
        try:
            self.OIDC_OP_AUTHORIZATION_ENDPOINT = discovery.endpoint("authorization_endpoint")
        except discovery.ProviderUnavailable as exc:
            # The provider is away: keep the person signed in rather than lock everyone out.
            logger.warning("Could not recheck a sign-in with the provider: %s", exc)
            return None
        return super().process_request(request)
