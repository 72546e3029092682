"""The sign-in's two legs (off to the provider, back with a code) and the provider's logout;
every way a sign-in can fail lands on the sign-in page with one plain sentence."""

from __future__ import annotations

import logging
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import auth
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpResponseRedirect
from django.urls import reverse
from django.views.decorators.http import require_POST
from mozilla_django_oidc.utils import absolutify
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from apps.accounts.oidc import discovery

logger = logging.getLogger(__name__)

REASONS = {
    "unreachable": "The sign-in service could not be reached. Try again in a minute.",
    "state": "That sign-in was not started here, or was already used. Start again.",
    "expired": "That sign-in took too long or was already used. Start again.",
    "audience": "The sign-in service's answer was meant for another application.",
    "token": "The sign-in service's answer did not check out. Start again.",
    "denied": "The sign-in service did not sign you in.",
    "ended": "Your organisation's sign-in no longer vouches for you: you were signed out.",
    "disabled": "This account is disabled. Ask an administrator.",
    "unverified": "Your organisation's sign-in did not confirm your e-mail address.",
    "ambiguous": "More than one account has your e-mail address. Ask an administrator.",
    "no-account": "There is no Parley account for you yet. Ask an administrator.",
    "domain": "Accounts of your e-mail domain may not sign in here.",
    "group": "You are in none of the groups allowed to sign in here.",
}


def refused(reason: str) -> HttpResponseRedirect:
    return HttpResponseRedirect(f"{reverse('login')}?{urlencode({'refused': reason})}")


def _require_provider() -> None:
    if not settings.PARLEY_OIDC_ISSUER:
        raise Http404("Sign-in through a provider is not set up here.")


class SignInStart(OIDCAuthenticationRequestView):
    """Off to the provider, with a fresh state, nonce and PKCE challenge in the session."""

    def __init__(self, *args, **kwargs) -> None:
        super(OIDCAuthenticationRequestView, self).__init__(*args, **kwargs)
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID

    def get(self, request):
        _require_provider()
        try:
            self.OIDC_OP_AUTH_ENDPOINT = discovery.endpoint("authorization_endpoint")
        except discovery.ProviderUnavailable as exc:
            logger.warning("The sign-in provider could not be reached: %s", exc)
            return refused("unreachable")
        return super().get(request)


class SignInCallback(OIDCAuthenticationCallbackView):
    """Back from the provider: the state must be one this browser's session started."""

    def get(self, request):
        _require_provider()
        was_signed_in = request.user.is_authenticated
        if request.GET.get("error"):
            logger.info("The provider ended a sign-in: %s", request.GET.get("error")[:100])
            super().get(request)  # forgets the state, signs out a session it was refreshing
            return refused("ended" if was_signed_in else "denied")
        if "oidc_states" not in request.session:
            logger.warning("A sign-in callback came with no sign-in started in its session")
            return refused("state")
        try:
            return super().get(request)
        except SuspiciousOperation as exc:  # a state this session never issued
            logger.warning("A sign-in callback was refused: %s", exc)
            return refused("state")

    def login_failure(self):
        user = getattr(self, "user", None)
        if user is not None and not user.is_active:
            return refused("disabled")
        return refused(getattr(self.request, "parley_sign_in_refused", "token"))


def provider_logout_url(request) -> str:
    """Where signing out sends the browser: the provider's own sign-out when this session came
    from it (so the next sign-in asks again), else the sign-in page."""
    back = absolutify(request, reverse("login"))
    id_token = request.session.get("oidc_id_token")
    if not (settings.PARLEY_OIDC_ISSUER and id_token):
        return reverse("login")
    try:
        end_session = discovery.document().get("end_session_endpoint")
    except discovery.ProviderUnavailable:
        end_session = None
    if not end_session:
        return reverse("login")
    query = urlencode({"id_token_hint": id_token, "post_logout_redirect_uri": back,
                       "client_id": settings.OIDC_RP_CLIENT_ID})  # fmt: skip
    return f"{end_session}?{query}"


@require_POST
def sign_out(request):
    """Sign out here, then at the provider when the session came from it."""
    destination = provider_logout_url(request)
    auth.logout(request)
    return HttpResponseRedirect(destination)
