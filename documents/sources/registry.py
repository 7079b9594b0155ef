"""Every kind of source, by its name (the seam is ``documents/sources/connectors.py``)."""

from __future__ import annotations

from django.utils.translation import gettext_noop

from documents.sources import folder, s3, web
from documents.sources.connectors import Refused, SourceKind

KINDS: dict[str, SourceKind] = {kind.kind: kind for kind in (folder.KIND, s3.KIND, web.KIND)}


def kind_of(name: str) -> SourceKind:
    """The kind called ``name``; :class:`Refused` (``invalid_kind``) for any other."""
    found = KINDS.get(name)
    if found is None:
        raise Refused("invalid_kind", gettext_noop("Sources of this kind are not available."), "kind")
    return found
