"""The design's dependency rule and the single writer of ``status``, checked on the source."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def python_files(app: str) -> list[Path]:
    return [p for p in (ROOT / app).rglob("*.py") if "migrations" not in p.parts]


def test_jobs_never_imports_documents():
    offenders = []
    for path in python_files("jobs"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [
                f"{path.name}: {n}" for n in names if n == "documents" or n.startswith("documents.")
            ]
    assert offenders == []


def _on_job_manager(call: ast.Call) -> bool:
    """True when the call chain starts at ``Job.objects`` (e.g. ``Job.objects.filter(...).update``)."""
    node: ast.AST = call.func
    while isinstance(node, ast.Attribute | ast.Call):
        node = node.value if isinstance(node, ast.Attribute) else node.func
    return isinstance(node, ast.Name) and node.id == "Job"


def test_status_is_written_only_by_the_transition_helper():
    writers = []
    for app in ("jobs", "documents", "config"):
        for path in python_files(app):
            for node in ast.walk(ast.parse(path.read_text())):
                where = f"{path.relative_to(ROOT)}"
                if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_update_values":
                    writers.append(where)  # an UPDATE built by hand (with RETURNING)
                if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in {"update", "bulk_update"}:
                    named = any(kw.arg == "status" for kw in node.keywords)
                    spread = any(kw.arg is None for kw in node.keywords) and _on_job_manager(node)
                    if named or spread:
                        writers.append(where)
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        if isinstance(target, ast.Attribute) and target.attr == "status":
                            writers.append(where)
    assert writers == ["jobs/services/transition.py"]
