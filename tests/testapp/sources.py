"""A pause for the source chaos tests (``tests/reliability/test_sources_cluster.py``).

With ``TEST_SOURCE_PAUSE`` set in a worker's environment (``<stage>:<key>:<folder>``), folder
sources keep their real connector, wrapped: when the stage ``list`` reaches ``<key>`` in the
listing, or the stage ``apply`` starts to read ``<key>``, the worker writes its pid to
``<folder>/reached`` and waits while ``<folder>/hold`` exists (the heartbeat goes on: the lease
stays held). The test then kills the worker or cancels the sync at a known point, and removes
``hold`` to let the stage go on. Without the variable nothing changes.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from tests.timing import hold_for

if TYPE_CHECKING:
    from documents.sources.connectors import Connector, Fetched, Listed
    from documents.sources.models import Source

ENV = "TEST_SOURCE_PAUSE"


def _pause(folder: Path) -> None:
    (folder / "reached").write_text(str(os.getpid()))
    while (folder / "hold").exists():
        hold_for(0.05)  # a listing or read that takes this long


class PausingConnector:
    def __init__(self, inner: Connector, stage: str, key: str, folder: Path) -> None:
        self.inner, self.stage, self.key, self.folder = inner, stage, key, folder

    def listing(self) -> Iterator[Listed | tuple[str, str]]:
        for entry in self.inner.listing():
            key = entry[0] if isinstance(entry, tuple) else entry.key
            if self.stage == "list" and key == self.key:
                _pause(self.folder)
            yield entry

    def fetch(self, key: str) -> AbstractContextManager[Fetched]:
        if self.stage == "apply" and key == self.key:
            _pause(self.folder)
        return self.inner.fetch(key)

    def digest(self, key: str) -> str:
        return self.inner.digest(key)

    def exists(self, key: str) -> bool:
        return self.inner.exists(key)


def install() -> None:
    """Wrap the folder kind's connector when :data:`ENV` is set."""
    setting = os.environ.get(ENV)
    if not setting:
        return
    from documents.sources import folder, registry

    stage, key, pause_folder = setting.split(":", 2)

    def connect(source: Source, credentials: dict[str, str]) -> Connector:
        return PausingConnector(folder.KIND.connect(source, credentials), stage, key, Path(pause_folder))

    registry.KINDS["folder"] = dataclasses.replace(folder.KIND, connect=connect)
