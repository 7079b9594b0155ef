"""SQLite's full-text ranking: BM25 from the searching tenant's own statistics.

FTS5's ``bm25()`` counts over its whole table: a word's rarity, the number of rows and their
average length would be every tenant's, so a score would move when another tenant indexes a
word, and tell that it did. Here the table's terms carry their tenant (``<tenant id>_<word>``,
``documents.retrieval.schema``), so every count a ranking reads is the tenant's own:

- the words of the query as FTS5's tokenizer makes them (case folded, diacritics removed),
  through a scratch in-memory FTS5 table with the index's tokenizer (``index_terms``);
- N and the average length: the tenant's entries and terms, kept by the index's triggers;
- each term's document frequency: FTS5's vocabulary of the tenant's term (one lookup);
- each matching row's term frequency: the occurrences of the tenant's terms (``fts5vocab``
  instances: the tenant's posting lists only), and its length from its search text.

The score is Okapi BM25 with FTS5's ``k1``, ``b`` 0 (``backends.B``: no length norm) and the
idf that never goes negative (``log(1 + (N - n + 0.5) / (n + 0.5))``, PostgreSQL's ranking uses
the same): in a small tenant a word in most of its chunks still counts a little. As before,
common terms (in more than ``COMMON_SHARE`` of the tenant's entries) neither select nor score
rows when the query has rarer ones: they would select most of the tenant and add little. Which
terms score and their idf follow PostgreSQL's rule, caps included (``backends.scoring_terms``),
so both databases rank alike in a tenant of any size.
"""

from __future__ import annotations

import sqlite3
import threading

from documents.retrieval import backends
from documents.retrieval.backends import (
    JOIN_DOCUMENT,
    K1,
    PAGE_WEIGHT,
    B,
    Ranked,
    Scope,
    page_bm25,
    scoring_terms,
)
from documents.retrieval.schema import FTS, STATS, TOKENIZE, term_count

# Each selecting term's occurrences in the tenant's rows (its own terms: its posting lists only),
# counted per row in scope (f: also those among the row's first words, its version's title),
# then each row's BM25 over them (c) and its version's over the version's rows (p: per term the
# rows' counts summed, the title's counted once; ``backends.page_bm25``). CROSS JOIN fixes
# SQLite's join order: the terms first, then their occurrences, then their rows.
LENGTH_NORM = f"({1 - B} + {B} * f.len / %s)"
RANK_SQL = f"""
WITH w(term, idf) AS (VALUES {{values}}),
f AS (SELECT e.id, e.version_id, w.term, w.idf, count(*) AS tf,
             sum(i.offset < {term_count("v.search_title")}) AS title_tf, {term_count("e.search_text")} AS len
      FROM w CROSS JOIN {FTS}_instance i ON i.term = w.term
      CROSS JOIN documents_indexentry e ON e.id = i.doc
      CROSS JOIN documents_documentversion v ON v.id = e.version_id {JOIN_DOCUMENT}
      WHERE {{where}} GROUP BY e.id, w.term),
c AS (SELECT f.id, f.version_id, sum(f.idf * f.tf * {K1 + 1} / (f.tf + {K1} * {LENGTH_NORM})) AS s
      FROM f GROUP BY f.id),
g AS (SELECT f.version_id, f.term, min(f.idf) AS idf, sum(f.tf) AS tf, count(*) AS n,
             max(f.title_tf) AS title_tf
      FROM f GROUP BY f.version_id, f.term),
p AS (SELECT g.version_id, sum({page_bm25("g.idf", "g.tf", "g.n", "g.title_tf")}) AS s
      FROM g CROSS JOIN documents_documentversion v ON v.id = g.version_id GROUP BY g.version_id)
SELECT c.id, {1 - PAGE_WEIGHT} * c.s + {PAGE_WEIGHT} * p.s AS s FROM c JOIN p ON p.version_id = c.version_id
ORDER BY s DESC, c.id LIMIT %s
"""


def tenant_term(tenant_id: int, term: str) -> str:
    """The index's term for ``term`` in ``tenant_id``'s rows."""
    return f"{tenant_id}_{term}"


_scratch = threading.local()


def index_terms(tokens: list[str]) -> list[str]:
    """The index's words for the query's ``tokens`` (FTS5's tokenizer: case folded, diacritics
    removed, a token it splits gives each part), each once, in order. Read from a scratch FTS5
    table in memory (one per thread) that holds them only until the read is done."""
    db = getattr(_scratch, "db", None)
    if db is None:
        db = sqlite3.connect(":memory:", isolation_level=None)
        db.execute(f"CREATE VIRTUAL TABLE q USING fts5(t, content='', tokenize=\"{TOKENIZE}\")")
        db.execute("CREATE VIRTUAL TABLE q_instance USING fts5vocab(q, 'instance')")
        _scratch.db = db
    db.execute("BEGIN")
    try:
        db.executemany("INSERT INTO q(rowid, t) VALUES (?, ?)", list(enumerate(tokens)))
        rows = db.execute("SELECT term FROM q_instance ORDER BY doc, offset").fetchall()
    finally:
        db.execute("ROLLBACK")
    return list(dict.fromkeys(term for (term,) in rows))


def tenant_counts(tenant_id: int) -> tuple[int, int]:
    """The tenant's index entries and the terms they hold, together."""
    rows = backends.fetch(f"SELECT entries, terms FROM {STATS} WHERE tenant_id = %s", [tenant_id])
    return (int(rows[0][0]), int(rows[0][1])) if rows else (0, 0)


def frequencies(tenant_id: int, terms: list[str]) -> dict[str, int]:
    """{term: the tenant's entries holding it} for those of ``terms`` it holds."""
    keys = {tenant_term(tenant_id, t): t for t in terms}
    marks = ", ".join(["%s"] * len(keys))
    rows = backends.fetch(f"SELECT term, doc FROM {FTS}_vocab WHERE term IN ({marks})", list(keys))
    return {keys[key]: int(df) for key, df in rows if df}


def lexical(scope: Scope, tokens: list[str], limit: int) -> Ranked:
    """The scope's entries matching any of ``tokens``, best BM25 (on the tenant's counts) first."""
    entries, total_terms = tenant_counts(scope.tenant_id)
    terms = index_terms(tokens) if entries else []
    df = frequencies(scope.tenant_id, terms) if terms else {}
    scoring = scoring_terms(entries, df, terms)
    if not scoring:
        return []
    average_length = max(total_terms / entries, 1.0)
    where, params = backends.scope_sql(scope)
    sql = RANK_SQL.format(values=", ".join(["(%s, %s)"] * len(scoring)), where=where)
    weights = [(tenant_term(scope.tenant_id, t), w) for t, w in scoring]
    page = backends.average_page(scope.tenant_id, entries)
    rows = backends.fetch(sql, [*(v for pair in weights for v in pair), *params, average_length, page, limit])
    return [(int(i), float(s)) for i, s in rows]
