"""Token authentication that also finds the user's workspace, in one query.

Every API request needs the user and then the tenant; DRF's ``TokenAuthentication`` reads the
token and user, and the tenant would cost a second query. Here the membership is fetched by the
token key with the user, the token and the tenant joined (SQL built once per process:
documents/hot_reads.py), and the tenant is remembered on the user for
:func:`documents.selectors.tenant_for`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.utils.translation import gettext_lazy as _
from rest_framework.authentication import TokenAuthentication, get_authorization_header
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import AuthenticationFailed, Throttled

from documents.api import token_cache
from documents.hot_reads import token_owner
from documents.selectors import remember_tenant
from documents.throttles import token_failure_record

if TYPE_CHECKING:
    from rest_framework.request import Request


def user_for_token(key: str) -> tuple[Any, Token] | None:
    """The user and token for ``key`` (with the user's tenant remembered), or None."""
    # A good token seen in the last API_TOKEN_CACHE_SECONDS costs no query (documents/api/
    # token_cache.py states the revocation bound); otherwise one pre-built query for the token,
    # its user and the user's workspace (documents.hot_reads): every API request pays it, and the
    # ORM spent more time compiling it than the database did answering.
    found = token_cache.recall(key)
    if found is None:
        found = token_owner(key)
        if found is None:
            return None
        if found[0].is_active:  # an inactive user is refused, and read again every time
            token_cache.remember(key, *found)
    user, token, tenant = found
    remember_tenant(user, tenant)  # None for a user in no workspace: answered 403 later
    return user, token


class TenantTokenAuthentication(TokenAuthentication):
    """``Authorization: Token <key>``, or ``Bearer <key>`` as OpenAI-style clients send it: one
    token, whichever scheme a client library speaks."""

    other_keywords: tuple[str, ...] = ("Bearer",)

    def authenticate(self, request: Request) -> tuple[Any, Token] | None:
        try:
            return self._authenticate(request)
        except AuthenticationFailed:
            # Counted only on failure: a good token costs no extra query (clients poll), and a
            # guesser past the limit is answered 429 for the rest of the window.
            if token_failure_record(request) > settings.AUTH_FAILURE_LIMIT_PER_ADDRESS:
                raise Throttled(wait=settings.AUTH_FAILURE_WINDOW_SECONDS) from None
            raise

    def _authenticate(self, request: Request) -> tuple[Any, Token] | None:
        # DRF's TokenAuthentication.authenticate, for any of the accepted schemes.
        auth = get_authorization_header(request).split()
        schemes = {word.lower().encode() for word in (self.keyword, *self.other_keywords)}
        if not auth or auth[0].lower() not in schemes:
            return None
        if len(auth) != 2:
            raise AuthenticationFailed(_("Invalid token header: send the scheme, a space and the token."))
        try:
            key = auth[1].decode()
        except UnicodeError:
            raise AuthenticationFailed(_("Invalid token header: the token has invalid characters.")) from None
        return self.authenticate_credentials(key)

    def authenticate_credentials(self, key: str) -> tuple[Any, Token]:
        found = user_for_token(key)
        if found is None:
            raise AuthenticationFailed(_("The token is not valid: it is wrong or was revoked."))
        if not found[0].is_active:
            raise AuthenticationFailed(_("The token is not valid: its user was deactivated."))
        return found
