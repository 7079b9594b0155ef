"""The embedder backends this deployment can build, by name.

Each backend module registers itself when :mod:`documents.embedders` loads it: the name that
``EMBEDDINGS_BACKEND`` chooses it by, a factory that builds it from the settings, and how a spec or
a stored vector-space name (``hashing-v1-512``) maps back to one of its embedders. The registry
has no Django and no database: benchmarks and child processes import backends on their own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from documents.embedders.base import Embedder


@dataclass(frozen=True)
class Backend:
    """How one backend builds its embedders and finds them again by name."""

    name: str  # the ``EMBEDDINGS_BACKEND`` value that chooses it
    # Builds an embedder from the settings; keyword options override what the settings say.
    build: Callable[..., Embedder]
    # The start of every name its embedders report ("hashing-" in "hashing-v1-512").
    prefix: str
    # A spec of this backend ("<name>", "<name>:<argument>" or a name its embedders report) ->
    # that embedder, or None when it has none by that name. Without it, only the configured
    # embedder of this backend is known.
    named: Callable[[str], Embedder | None] | None = None
    # The deployment's one embedder of this backend, when it needs more than ``build()`` (e.g. a
    # limiter shared by every process).
    configured: Callable[[], Embedder] | None = None


_backends: dict[str, Backend] = {}


def register(
    name: str,
    build: Callable[..., Embedder],
    *,
    prefix: str | None = None,
    named: Callable[[str], Embedder | None] | None = None,
    configured: Callable[[], Embedder] | None = None,
) -> Backend:
    """Make backend ``name`` available; its embedders' names start with ``prefix`` (``<name>-``).

    A second backend of the same name, or whose names could be taken for another's, is refused:
    a stored vector-space name must map back to exactly one backend.
    """
    prefix = prefix or f"{name}-"
    if name in _backends:
        raise ValueError(f"an embedder backend named {name!r} is already registered")
    for other in _backends.values():
        if prefix.startswith(other.prefix) or other.prefix.startswith(prefix):
            raise ValueError(
                f"embedder names starting {prefix!r} would clash with the {other.name!r} backend's"
            )
    backend = Backend(name=name, build=build, prefix=prefix, named=named, configured=configured)
    _backends[name] = backend
    return backend


def backend_named(name: str) -> Backend | None:
    """The backend registered as ``name``, if any."""
    return _backends.get(name)


def backend_names() -> tuple[str, ...]:
    """Every registered backend's name, in registration order."""
    return tuple(_backends)


def backend_of(spec: str) -> Backend | None:
    """The backend a spec belongs to: ``<backend>`` or ``<backend>:<argument>``, else the one whose
    embedders' names start the spec."""
    head = spec.partition(":")[0]
    if head in _backends:
        return _backends[head]
    return next((b for b in _backends.values() if spec.startswith(b.prefix)), None)
