"""``Authorization: Bearer <token>``: the platform API token, as the OpenAI SDK sends its api_key.

The same token model, lookup (user, token and tenant in one query) and failure counting as
``/api/``'s ``Token`` scheme; only the keyword differs.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension

from documents.api.auth import TenantTokenAuthentication


class BearerTokenAuthentication(TenantTokenAuthentication):
    keyword = "Bearer"


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """The schema names it as OpenAI clients know it: HTTP bearer."""

    target_class = BearerTokenAuthentication
    name = "bearerAuth"
    priority = 1

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "A platform API token"}
