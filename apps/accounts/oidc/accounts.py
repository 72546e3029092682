"""Which account a provider's sign-in opens, and whether it may open one at all."""

from __future__ import annotations

import re

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.accounts.models import ProviderIdentity


class SignInRefused(Exception):
    """A sign-in the provider vouched for that Parley still turns away; `reason` names the
    sentence the sign-in page shows (REASONS in apps/accounts/oidc/views.py)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


def account_for(*, issuer: str, claims: dict) -> object:
    """The active account these checked claims sign in to, linking or creating it on a first
    sign-in; raises SignInRefused."""
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise SignInRefused("token", "no subject")
    raw_email = claims.get("email")
    email = raw_email.strip() if isinstance(raw_email, str) else ""
    verified = claims.get("email_verified") in (True, "true")
    _check_allowed(email=email, verified=verified, claims=claims)
    identity = (
        ProviderIdentity.objects.select_related("user")
        .filter(issuer=issuer, subject=subject)
        .first()
    )
    if identity is None:
        identity = _link(
            issuer=issuer, subject=subject, email=email, verified=verified, claims=claims
        )
    user = identity.user
    if not user.is_active:
        raise SignInRefused("disabled", f"account {user.pk} is disabled")
    identity.last_sign_in_at = timezone.now()
    if verified:
        identity.email = email
    identity.save(update_fields=["last_sign_in_at", "email"])
    return user


def _check_allowed(*, email: str, verified: bool, claims: dict) -> None:
    domains = settings.PARLEY_OIDC_ALLOWED_DOMAINS
    if domains:
        domain = email.rpartition("@")[2].lower()
        if not verified or domain not in domains:
            raise SignInRefused("domain", f"{domain or 'no e-mail'} is not allowed")
    groups = settings.PARLEY_OIDC_ALLOWED_GROUPS
    if groups:
        held = claims.get(settings.PARLEY_OIDC_GROUPS_CLAIM) or []
        held = [held] if isinstance(held, str) else held
        if not isinstance(held, list) or not set(groups) & {str(g) for g in held}:
            raise SignInRefused("group", "in none of the allowed groups")


def _link(
    *, issuer: str, subject: str, email: str, verified: bool, claims: dict
) -> ProviderIdentity:
    """A first sign-in: the account of that verified e-mail, else a new one."""
    if not email or not verified:
        raise SignInRefused("unverified", "the provider did not vouch for an e-mail")
    User = get_user_model()
    matches = list(User.objects.filter(email__iexact=email).order_by("pk")[:2])
    if len(matches) > 1:
        raise SignInRefused("ambiguous", f"{len(matches)} accounts share {email}")
    if matches:
        user = matches[0]
    elif settings.PARLEY_OIDC_CREATE_USERS:
        user = None
    else:
        raise SignInRefused("no-account", f"no account has {email}")
    try:
        with transaction.atomic():
            if user is None:
                user = User.objects.create_user(
                    _free_username(claims, email),
                    email=email,
                    first_name=str(claims.get("given_name") or "")[:150],
                    last_name=str(claims.get("family_name") or "")[:150],
                )  # fmt: skip  (no usable password: this account signs in through the provider)
            return ProviderIdentity.objects.create(
                user=user, issuer=issuer, subject=subject, email=email
            )
    except IntegrityError:  # the same person's other tab linked it a moment ago
        return ProviderIdentity.objects.select_related("user").get(issuer=issuer, subject=subject)


def _free_username(claims: dict, email: str) -> str:
    wanted = claims.get("preferred_username") or email.partition("@")[0]
    base = re.sub(r"[^\w.+-]", "", str(wanted))[:140] or "member"
    User = get_user_model()
    name, number = base, 1
    while User.objects.filter(username__iexact=name).exists():
        number += 1
        name = f"{base}-{number}"
    return name
