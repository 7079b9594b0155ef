"""``{{ collection|collection_name }}``: a collection's name as a reader sees it.

The default collection is stored as "Default" (programs and the API find it by that name and by
``is_default``); the pages say it in the reader's language. A default collection someone renamed
keeps the name it was given.
"""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.translation import pgettext

from documents.services.collections import DEFAULT_NAME

register = template.Library()


@register.filter
def collection_name(collection: Any) -> str:
    name = str(collection.name)
    if collection.is_default and name == DEFAULT_NAME:
        return pgettext("the default collection's name", "Default")
    return name
