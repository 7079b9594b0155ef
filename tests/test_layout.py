"""The design's dependency rule and the single writer of ``status``, checked on the source."""

from __future__ import annotations

import ast
import re
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


# Words of the documents domain that the generic engine must not hold (in code, comments or
# templates): a job kind registers its own vocabulary with its pipeline bundle.
DOMAIN_WORDS = re.compile(
    r"\b(documents?|ocr|pdf|docx|pars(e|ing)|parse_failed|chunk(s|ing)?|embed(ding|dings|der)?|index(ing|_failed))\b",
    re.IGNORECASE,
)


def test_the_engine_holds_no_document_words():
    offenders = []
    sources = [*python_files("jobs"), *(ROOT / "templates" / "admin" / "jobs").rglob("*.html")]
    for path in sources:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if DOMAIN_WORDS.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []


LONG_MODULE = 300


def test_long_modules_say_why_at_their_top():
    """A module over ~300 lines carries ``# long-module: <reason>`` in its first lines."""
    unexplained = []
    for app in ("jobs", "documents", "config"):
        for path in python_files(app):
            lines = path.read_text().splitlines()
            head = "\n".join(lines[:30])
            if len(lines) > LONG_MODULE and "# long-module:" not in head:
                unexplained.append(f"{path.relative_to(ROOT)} ({len(lines)} lines)")
    assert unexplained == []


# Keys only a job's status body has: a dict literal holding one of them outside the output
# serializers is a hand-built copy of the shape that will drift from the schema.
STATUS_ONLY_KEYS = {"status_url", "events_url", "stage_index", "stage_count", "can_cancel", "can_retry"}


def test_answer_shapes_come_from_the_output_serializers_and_urls_from_reverse():
    contract = ROOT / "documents" / "api" / "output.py"
    offenders = []
    for path in python_files("documents"):
        for node in ast.walk(ast.parse(path.read_text())):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.JoinedStr) and node.values:
                head = node.values[0]
                if isinstance(head, ast.Constant) and str(head.value).startswith(("/api/", "/v1/")):
                    offenders.append(f"{where}: a URL built by hand (use reverse())")
            if isinstance(node, ast.Dict) and path != contract:
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant)} & STATUS_ONLY_KEYS
                if keys:
                    offenders.append(f"{where}: a status shape built by hand ({sorted(keys)})")
    assert offenders == []


# The search index seam: vector and full-text SQL lives in documents/retrieval/ (and the
# migrations that create the tables); everyone else calls documents.retrieval.index.
INDEX_SQL = re.compile(
    r"documents_chunkvector|documents_indexentry|_fts\b|fts5|bm25\(|vec_distance|halfvec|hnsw"
    r"|tsvector|to_tsquery|ts_rank|::vector|binary_quantize|embedding_bits",
    re.IGNORECASE,
)
INDEX_INTERNALS = {"pgvector", "codes", "sqlite_vec", "schema"}


def _code_strings(tree: ast.AST) -> list[tuple[int, str]]:
    """String constants that are not docstrings."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def index_seam_offences(path: Path, tree: ast.AST) -> list[str]:
    found = [f"{path}:{line}: {text[:60]!r}" for line, text in _code_strings(tree) if INDEX_SQL.search(text)]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = {f"{node.module}.{alias.name}" for alias in node.names} | {node.module}
            internal = {n for n in names if n.rsplit(".", 1)[-1] in INDEX_INTERNALS and "retrieval" in n}
            found += [f"{path}:{node.lineno}: imports {n}" for n in sorted(internal)]
    return found


def test_vector_and_full_text_sql_live_only_behind_the_index_seam():
    offences = []
    for app in ("documents", "jobs", "config"):
        for path in python_files(app):
            rel = path.relative_to(ROOT)
            if rel.parts[:2] in {("documents", "retrieval"), ("documents", "migrations")}:
                continue
            offences += index_seam_offences(rel, ast.parse(path.read_text()))
    assert not offences, "index SQL or index internals outside documents/retrieval/:\n" + "\n".join(offences)


def test_the_seam_check_sees_sql_and_internal_imports(tmp_path: Path):
    source = (
        '"""Mentions documents_chunkvector in a docstring: fine."""\n'
        "from documents.retrieval import pgvector\n"
        'SQL = "UPDATE documents_chunkvector SET x = 1"\n'
    )
    offences = index_seam_offences(Path("x.py"), ast.parse(source))
    assert len(offences) == 2 and "imports documents.retrieval.pgvector" in offences[1]


# Packages whose module graph must hold no import circle, counting the imports inside functions
# (an import moved into a function hides a circle from Python, not from the reader).
ACYCLIC_PACKAGES = ("jobs", "documents", "config")


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(node: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import under ``node`` at any depth, except those only a type checker runs."""
    found: list[ast.Import | ast.ImportFrom] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for branch in child.orelse:
                found += _imports(ast.Module(body=[branch], type_ignores=[]))
            continue
        if isinstance(child, ast.Import | ast.ImportFrom):
            found.append(child)
        found += _imports(child)
    return found


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports; ``from x import y`` names ``x.y`` when that
    is a module, else ``x``; a name outside the package's modules is left out."""
    modules: dict[str, tuple[Path, bool]] = {}
    for path in sorted((root / package.replace(".", "/")).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if "migrations" in parts:
            continue
        is_package = parts[-1] == "__init__"
        modules[".".join(parts[:-1] if is_package else parts)] = (path, is_package)

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in modules.items():
        here = name if is_package else name.rpartition(".")[0]
        targets: set[str | None] = set()
        for node in _imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {known(alias.name) for alias in node.names}
                continue
            base = node.module or ""
            if node.level:  # relative: from the package ``level - 1`` above this module's
                anchor = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                targets.add(full if full in modules else known(base))
        graph[name] = {t for t in targets if t is not None and t != name}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle (a path back to its start) per strongly connected group of modules."""
    circles = []
    seen: set[str] = set()
    for start in sorted(graph):
        if start in seen:
            continue
        # Every module reachable from ``start`` that also reaches it back shares its group.
        reach = _reachable(graph, start)
        group = {m for m in reach if start in _reachable(graph, m)}
        seen |= group | {start}
        if group:
            circles.append(_path_back(graph, start, group))
    return circles


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    found: set[str] = set()
    todo = list(graph[start])
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            todo += graph.get(name, ())
    return found


def _path_back(graph: dict[str, set[str]], start: str, group: set[str]) -> list[str]:
    """The shortest import path from ``start`` back to itself inside ``group``."""
    paths = {start: [start]}
    queue = [start]
    while queue:
        name = queue.pop(0)
        for target in sorted(graph[name]):
            if target == start:
                return [*paths[name], start]
            if target in group and target not in paths:
                paths[target] = [*paths[name], target]
                queue.append(target)
    raise AssertionError("a group without a circle")


def test_packages_have_no_import_circle_even_inside_functions():
    circles = []
    for package in ACYCLIC_PACKAGES:
        circles += [" -> ".join(circle) for circle in import_circles(import_graph(ROOT, package))]
    assert circles == []


def _write_package(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_circle_hidden_in_a_function_is_found_and_named(tmp_path):
    _write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/models.py": "def word():\n    from pkg.services import run\n    return run()\n",
            "pkg/services/__init__.py": "",
            "pkg/services/run.py": "from .. import models\n",
            "pkg/leaf.py": "import pkg.models\n",
        },
    )
    assert import_circles(import_graph(tmp_path, "pkg")) == [["pkg.models", "pkg.services.run", "pkg.models"]]


def test_type_checking_imports_make_no_circle(tmp_path):
    _write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg import b\n",
            "pkg/b.py": (
                "import typing\nfrom typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from pkg import a\nif typing.TYPE_CHECKING:\n    import pkg.a\n"
                "else:\n    import json\n"
            ),
        },
    )
    assert import_graph(tmp_path, "pkg") == {"pkg": set(), "pkg.a": {"pkg.b"}, "pkg.b": set()}
    assert import_circles(import_graph(tmp_path, "pkg")) == []


# Words that point outside the repo: an issue tracker's numbers, a design document kept elsewhere,
# a path beside the checkout. A file says the reason itself or points at a page of docs/ or bench/.
OUTSIDE_REFERENCES = (
    ("an issue number", re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE)),
    ("a design document", re.compile(r"\bDESIGN\b")),
    ("a path beside the checkout", re.compile(r"\.\./shared")),
)
SELF_EXPLAINING_DIRS = ("config", "jobs", "documents", "templates", "tests", "bench")


def outside_references(text: str) -> list[str]:
    """Each line of ``text`` that points outside the repo, as ``line: what``."""
    return [
        f"{number}: {what}"
        for number, line in enumerate(text.splitlines(), start=1)
        for what, pattern in OUTSIDE_REFERENCES
        if pattern.search(line)
    ]


def self_explaining_files() -> list[Path]:
    files = [ROOT / "pyproject.toml", ROOT / "Makefile"]
    for folder in SELF_EXPLAINING_DIRS:
        for path in sorted((ROOT / folder).rglob("*")):
            template = path.suffix in {".html", ".txt"} and "templates" in path.parts
            if path.is_file() and (path.suffix == ".py" or template):
                files.append(path)
    return files


def test_files_cite_no_issue_number_nor_outside_document():
    files = self_explaining_files()
    assert ROOT / "templates" / "base.html" in files and Path(__file__) in files
    offences = [
        f"{path.relative_to(ROOT)}:{offence}"
        for path in files
        for offence in outside_references(path.read_text(encoding="utf-8"))
    ]
    assert offences == []


def test_the_outside_reference_check_sees_each_kind():
    # Built from pieces, so that this file itself passes the check it proves.
    sample = "\n".join(
        [
            "cap the body (" + "Issue" + " 16, finding 4)",
            "see " + "DES" + 'IGN "Routes" for both forms',
            "read it from .." + "/shared/notes",
            "fine: STAGE_WEIGHTS, a design choice, DESIGN_WEIGHTS, tissue 3",
        ]
    )
    assert outside_references(sample) == [
        "1: an issue number",
        "2: a design document",
        "3: a path beside the checkout",
    ]


# config.settings parses the environment once into typed values and defines every setting the
# code reads: a cast or a getattr default at a call site repeats (and may contradict) it.
SETTINGS_CAST = re.compile(r"\b(?:int|float|bool|str)\(\s*settings\.|\bgetattr\(\s*settings\s*,")


def settings_cast_offences(path: Path, text: str) -> list[str]:
    return [f"{path}:{n}" for n, line in enumerate(text.splitlines(), 1) if SETTINGS_CAST.search(line)]


def test_settings_are_read_typed_without_casts_or_getattr_defaults():
    offences = []
    for app in ("config", "jobs", "documents"):
        for path in python_files(app):
            offences += settings_cast_offences(path.relative_to(ROOT), path.read_text())
    assert offences == []


def test_the_settings_check_sees_casts_and_getattr_defaults():
    sample = Path("sample.py")
    for line in (
        "size = int(settings.EMBEDDING_BATCH_SIZE)",
        "wait = float( settings.JOBS_LEASE_SECONDS)",
        "on = bool(settings.SEARCH_CONCURRENT)",
        "root = str(settings.JOBS_SCRATCH_DIR)",
        'backend = getattr(settings, "EMBEDDINGS_BACKEND", "local")',
    ):
        assert settings_cast_offences(sample, f"x = 1\n{line}\n") == ["sample.py:2"], line
    assert settings_cast_offences(sample, "size = settings.EMBEDDING_BATCH_SIZE\nn = int(limit)\n") == []
