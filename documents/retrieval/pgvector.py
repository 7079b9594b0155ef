"""Dense ranking inside PostgreSQL with pgvector (HNSW, cosine) — when the server has it.

Not enabled yet on this branch: without the extension the dense ranking takes the documented
fallback in ``documents.retrieval.backends``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt


def enabled(connection: Any) -> bool:
    """Whether ``connection`` ranks vectors with pgvector."""
    return False


def nearest(
    connection: Any, where: str, params: list[Any], embedder: str, vector: npt.NDArray[np.float32], limit: int
) -> list[tuple[int, float]]:
    raise NotImplementedError
