"""The SQL the index's rankings share (``documents.retrieval.index`` holds each backend's):
every scope condition goes inside each ranking's own query.

A :class:`Scope` says which entries may be hits: one tenant, the published version of each
document (or, for the indexing stage's probe, one given version), optionally some documents and
extra WHERE fragments over the document row (attribute filters, alias ``d``), and the caller's
principal keys (only documents granted to one of them). Both rankings put
all of it in the same query as the ranking itself, so ``k`` is never lost to a filter applied
afterwards, and neither reads more than its candidates' ids and scores into Python.

- Lexical: SQLite BM25 over FTS5's per-tenant terms (``documents.retrieval.sqlite_fts``);
  PostgreSQL the same BM25 over the GIN-indexed ``tsvector`` (see ``BM25_SQL``; the probe's one
  version over that version's entries alone, ``VERSION_RANK_SQL``). Both count
  word frequencies, rows and lengths in the searching tenant only, so no other tenant's index
  moves a score; both return at most ``LEXICAL_CANDIDATES`` rows and let very common words
  select no candidates of their own; PostgreSQL also ranks at most ``SCAN_CAP`` matching rows.
- Dense: SQLite computes the distance in the query with sqlite-vec (exact, in C, over the
  scope's rows only). PostgreSQL with pgvector: see ``documents.retrieval.pgvector``. PostgreSQL
  without pgvector: every vector of the scope by its sign code (Hamming distance in the query),
  the nearest few hundred by their full vectors (``documents.retrieval.codes``); a tenant's
  vectors are never all read.
"""

# long-module: the two rankings of each backend and the scope SQL they share must be read together
# to check that every condition runs inside each ranking's own query.

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from documents.retrieval.schema import TSV, term_count
from documents.retrieval.text import tsquery

LEXICAL_CANDIDATES = 200
# Okapi BM25's k1 (FTS5's) and b, for both databases' full-text rankings. b is 0: an entry is a
# chunk, whose length the chunker sets (a few hundred tokens, the last chunk of a document
# shorter), not its author, so BM25's length norm mostly rewarded a document's short last chunk
# and, in a tenant holding English and Chinese, penalised every Chinese chunk (each character is
# indexed twice, as itself and in a bigram) and with it weakened the saturation of repeated
# terms there. With FTS5's 0.75, on real documentation pages searched by their titles
# (bench/README.md, "Retrieval quality"), Chinese MRR@10 was 0.886 against 0.913 with 0, English
# 0.945 against 0.967.
K1 = 1.2
B = 0.0
# A chunk's score is (1 - PAGE_WEIGHT) times its BM25 plus PAGE_WEIGHT times its version's (its
# page's): BM25 over the term counts of the version's matching entries summed, the document's
# title counted once (every entry's search text opens with it, so the plain sum would count a
# title word once per chunk), with b PAGE_B over the version's words (``search_terms``, its
# title once) against the tenant's average published version. A page's evidence beyond its best
# chunk then counts, normalised by the page's length (bench/README.md, "The document's title
# counted once"). Within a version the order of its chunks is their own BM25's.
PAGE_WEIGHT = 0.5
PAGE_B = 0.75


def page_bm25(idf: str, tf: str, entries: str, title_tf: str, words: str = "v.search_terms") -> str:
    """SQL for a version's BM25 share of one term, the same on both databases: ``tf`` its
    matching entries' frequencies summed, ``entries`` how many of them hold the term, ``title_tf``
    the title's frequency (each of those entries opens with the title: it counts once, not once
    per entry), ``words`` the version's ``search_terms``; the parameter is the tenant's average
    page."""
    page_tf = f"({tf} - ({entries} - 1) * {title_tf})"
    norm = f"{K1} * ({1 - PAGE_B} + {PAGE_B} * coalesce({words} / nullif(%s, 0), 1.0))"
    return f"{idf} * {page_tf} * {K1 + 1} / ({page_tf} + {norm})"


Ranked = list[tuple[int, float]]  # (index entry id, component score), best first


@dataclass(frozen=True)
class Scope:
    tenant_id: int
    embedder: str
    version_id: uuid.UUID | None = None
    document_ids: Sequence[uuid.UUID] | None = None
    collection_ids: Sequence[uuid.UUID] | None = None
    where: Sequence[tuple[str, Sequence[Any]]] = field(default_factory=tuple)
    # The caller's principal keys (documents.principals.Viewer.principals): only documents with a
    # grant to one of them are hits. None: no access limit (a caller who sees every document,
    # or the platform itself: the indexing probe, evaluations).
    principals: Sequence[str] | None = None


def uuid_value(value: uuid.UUID) -> Any:
    # As the backend stores UUIDs (char(32) on SQLite, uuid on PostgreSQL).
    from documents.models import Document

    return Document._meta.pk.get_db_prep_value(value, connection)


JOIN_DOCUMENT = "JOIN documents_document d ON d.id = e.document_id"


def scope_sql(scope: Scope, tenant: str = "e.tenant_id") -> tuple[str, list[Any]]:
    """The scope's conditions over entry ``e`` and its document ``d`` (joined by ``JOIN_DOCUMENT``)."""
    sql = f"{tenant} = %s"
    params: list[Any] = [scope.tenant_id]
    if scope.version_id is not None:
        sql += " AND e.version_id = %s"
        params.append(uuid_value(scope.version_id))
    else:
        # Visibility is the publish commit: only the version the document points at is a hit.
        sql += " AND e.version_id = d.published_version_id"
    # On the document (d.id), not the entry: a document an access list or a filter rejects is
    # skipped whole, before its entries and vectors are read (SQLite tested it per entry).
    document_sql, document_params = _document_conditions(scope, "d.id")
    return sql + document_sql, params + document_params


def _document_conditions(scope: Scope, document_id: str) -> tuple[str, list[Any]]:
    """The scope's conditions on documents (ids, collections, attribute filters over ``d``),
    each as `` AND ...``; ``document_id`` names the column the ids are matched on."""
    sql = ""
    params: list[Any] = []
    if scope.document_ids is not None:
        ids = list(scope.document_ids) or [uuid.UUID(int=0)]
        sql += f" AND {document_id} IN ({', '.join(['%s'] * len(ids))})"
        params.extend(uuid_value(i) for i in ids)
    if scope.collection_ids is not None:
        ids = list(scope.collection_ids) or [uuid.UUID(int=0)]
        sql += f" AND d.collection_id IN ({', '.join(['%s'] * len(ids))})"
        params.extend(uuid_value(i) for i in ids)
    for fragment, fragment_params in scope.where:
        sql += f" AND ({fragment})"
        params.extend(fragment_params)
    if scope.principals is not None:
        # The access lists, in the same query as the ranking (never after its top k): one probe of
        # the grants' (document, principal) index per candidate document.
        keys = list(scope.principals) or [""]
        sql += (
            f" AND EXISTS (SELECT 1 FROM documents_documentgrant dg WHERE dg.document_id = {document_id}"
            f" AND dg.principal IN ({', '.join(['%s'] * len(keys))}))"
        )
        params.extend(keys)
    return sql, params


def documents_sql(scope: Scope) -> tuple[str, list[Any]] | None:
    """The scope's conditions on its documents ``d`` alone, whose published versions hold every
    entry in scope (what ``scope_sql`` adds concerns the entries themselves and is applied to
    the final rows); None for the probe's one given version."""
    if scope.version_id is not None:
        return None
    document_sql, document_params = _document_conditions(scope, "d.id")
    return "d.tenant_id = %s" + document_sql, [scope.tenant_id, *document_params]


# The same Okapi BM25 as SQLite's (``documents.retrieval.sqlite_fts``: K1, B, the idf, the terms
# that score), so both databases rank a query's hits alike. A term's frequency in a chunk is
# ts_rank_cd of that one term with every weight 1 and no normalisation (one per occurrence). A
# chunk's length in words is read from its tsvector too: ts_rank_cd of the query divided by the
# same rank normalised by length (flag 2: the positions it holds, one per word of the search
# text). On 10,000 candidates of 2,000 characters these two ranks cost about 0.13 s, counting
# the search text's spaces about 0.6 s (load average 11). The tenant's average length is that
# of its first LENGTH_SAMPLE entries (with B at 0 the length weighs nothing: the formula stays,
# so both databases keep one whatever b is, but the average is not read). (ts_rank_cd weighted
# by idf once stood here: each occurrence counted alike, so a chunk saying one of a Chinese
# query's bigrams four times came before the chunk holding three others once each.) Counting
# stops at the caps: past them a term is "common".
DF_CAP = 5_000
# Terms in more than this share of the tenant's chunks neither select nor score candidates,
# unless the query has nothing rarer.
COMMON_SHARE = 0.2
# Past DF_CAP / COMMON_SHARE chunks, the total no longer changes which terms are common; idf
# then uses this capped total (the order of idf values, which is what ranks, stays the same).
N_CAP = int(DF_CAP / COMMON_SHARE)
# The most rows one query ranks: bounded work even for a query of only common words.
SCAN_CAP = 10_000


def scoring_terms(n: int, df: dict[str, int], tokens: list[str]) -> list[tuple[str, float]]:
    """The query's terms that select and score rows, in order, each with its idf, from the
    tenant's entries ``n`` and each term's entries ``df`` (a term the tenant lacks is absent or
    0): the rule both databases rank by. Counts are capped (``n`` at ``N_CAP``, a term's at
    ``DF_CAP``: PostgreSQL stops counting there); a term in more than ``COMMON_SHARE`` of the
    entries, or in ``DF_CAP`` or more, is common and left out unless every term is."""
    n = min(n, N_CAP)
    present = [(t, min(df[t], DF_CAP)) for t in tokens if df.get(t)]
    common = min(COMMON_SHARE * n, DF_CAP - 1)
    selective = [(t, d) for t, d in present if d <= common] or present
    return [(t, math.log(1 + (n - d + 0.5) / (d + 0.5))) for t, d in selective]


# Past this many entries the average length is that of a sample: it only scales the length norm.
LENGTH_SAMPLE = 1_000
COUNT_SQL = "SELECT count(*) FROM (SELECT 1 FROM documents_indexentry WHERE tenant_id = %s LIMIT %s) n"
LENGTH_SQL = f"""
SELECT avg({term_count("s.search_text")}) FROM (SELECT search_text FROM documents_indexentry
WHERE tenant_id = %s LIMIT %s) s
"""
DF_SQL = """
SELECT array_agg((SELECT count(*) FROM (SELECT 1 FROM documents_indexentry e WHERE e.tenant_id = %s
                  AND e.{tsv} @@ to_tsquery('simple', u.t) LIMIT %s) x) ORDER BY u.i)
FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, i)
"""
# The full-text column's most common lexemes and the share of rows holding each, as ANALYZE
# (autovacuum) samples them: PostgreSQL's statistics for a tsvector column.
COMMON_TERMS_SQL = """
SELECT most_common_elems::text::text[], most_common_elem_freqs,
       (SELECT reltuples FROM pg_class WHERE oid = 'documents_indexentry'::regclass)
FROM pg_stats WHERE tablename = 'documents_indexentry' AND attname = %s
"""
# How long one process reuses the statistics above before reading them again.
COMMON_TERMS_TTL = 300.0
_common_terms: dict[Any, tuple[float, dict[str, float]]] = {}


def common_terms() -> dict[str, float]:
    """{lexeme: rows holding it (estimated)} for the full-text column's most common lexemes
    (empty until the table has been analysed)."""
    key = (connection.settings_dict.get("HOST"), connection.settings_dict.get("NAME"))
    now = time.monotonic()
    cached = _common_terms.get(key)
    if cached is None or now - cached[0] > COMMON_TERMS_TTL:
        rows = fetch(COMMON_TERMS_SQL, [TSV])
        terms: dict[str, float] = {}
        if rows and rows[0][0]:
            # The frequencies array ends with three summary numbers (min, max, null share).
            total = max(0.0, float(rows[0][2] or 0))
            terms = {t: f * total for t, f in zip(rows[0][0], rows[0][1][: len(rows[0][0])], strict=True)}
        cached = _common_terms[key] = (now, terms)
    return cached[1]


# Each candidate with its version's length and title (c: one read of the version's row a
# candidate, OFFSET 0 keeps it whole so that nothing below is computed more than once a candidate)
# and, when B is not 0, its own length; its frequency of each selecting term (t: MATERIALIZED, each
# computed once, without copying the candidates' tsvectors); beside it what its version's candidates
# hold of that term (u: the frequencies summed and the candidates holding it, as window sums over
# the version and term); then per candidate its BM25 and its version's (``page_bm25``). The
# title's frequency of a term is read only where the page sum needs it: the version has more than
# one candidate holding the term and this one holds it (each entry's search text opens with the
# title, so an entry without the term has a title without it). No join of one candidate list with
# another: the planner takes such lists for a row each, and a nested loop of the candidates with
# their versions' sums grew with the square of the candidates (5.6 s at 2,000 candidates of one
# rare term, 1M chunks). w holds each term's query, idf and place; the parameters are the
# selecting query (when B is not 0), the tenant's average length, its average page and the limit.
UNIT = "array[1, 1, 1, 1]::float4[]"
# A chunk's length in words (the length norm's; with B at 0 it weighs nothing and is not read).
LENGTH = (
    f"round(ts_rank_cd({UNIT}, cand.tsv, a.q, 0) / nullif(ts_rank_cd({UNIT}, cand.tsv, a.q, 2), 0))"
    if B
    else "0"
)
SELECTING = ", (SELECT to_tsquery('simple', %s) AS q) a" if B else ""
TITLE_TF = (
    "(CASE WHEN u.vn > 1 AND u.tf > 0 "
    f"THEN ts_rank_cd({UNIT}, to_tsvector('simple', u.title), u.q, 0) ELSE 0 END)"
)
PAGE_SQL = page_bm25("u.idf", "u.vtf", "u.vn", TITLE_TF, "u.terms")
BM25_SQL = f"""
, t AS MATERIALIZED (SELECT c.id, c.version_id, c.len, c.terms, c.title, w.i, w.idf, w.q,
                            ts_rank_cd({UNIT}, c.tsv, w.q, 0)::float8 AS tf
      FROM (SELECT cand.id, cand.version_id, cand.tsv, {LENGTH} AS len,
                   v.search_terms AS terms, v.search_title AS title
            FROM cand JOIN documents_documentversion v ON v.id = cand.version_id{SELECTING}
            OFFSET 0) c, w),
u AS (SELECT t.id, t.len, t.terms, t.title, t.idf, t.q, t.tf, sum(t.tf) OVER pv AS vtf,
             count(*) FILTER (WHERE t.tf > 0) OVER pv AS vn
      FROM t WINDOW pv AS (PARTITION BY t.version_id, t.i))
SELECT u.id,
       {1 - PAGE_WEIGHT} * sum(u.idf * u.tf * {K1 + 1} / (u.tf + {K1} * ({1 - B} + {B} * u.len / %s)))
       + {PAGE_WEIGHT} * sum(CASE WHEN u.vn > 0 THEN {PAGE_SQL} ELSE 0 END)
FROM u
GROUP BY u.id
ORDER BY 2 DESC, u.id LIMIT %s
"""
# The selecting terms (each a tsquery, in order i) and their idf; parameters: the terms, their idf.
TERMS_CTE = """
WITH w AS MATERIALIZED (SELECT to_tsquery('simple', u.t) AS q, u.idf, u.i
                        FROM unnest(%s::text[], %s::float8[]) WITH ORDINALITY AS u(t, idf, i))"""
RANK_SQL = f"""{TERMS_CTE},
cand AS (SELECT e.id, e.version_id, e.{{tsv}} AS tsv FROM documents_indexentry e {{join}}
         WHERE {{where}} AND e.{{tsv}} @@ to_tsquery('simple', %s) LIMIT %s)
{BM25_SQL}"""

RARE_RANK_SQL = f"""{TERMS_CTE},
m AS MATERIALIZED (SELECT e.id, e.tenant_id, e.document_id, e.version_id, e.{{tsv}} AS tsv
                   FROM documents_indexentry e
                   WHERE e.tenant_id = %s AND e.{{tsv}} @@ to_tsquery('simple', %s)),
cand AS (SELECT e.id, e.version_id, e.tsv FROM m e {{join}} WHERE {{where}} LIMIT %s)
{BM25_SQL}"""

# One version's entries (the indexing stage's probe) through the (version, ordinal) index, then
# matched: one document's chunks, however large the tenant. "+ 0" keeps the planner from
# combining the tenant's index with the version's (which reads an index entry of every row of the
# tenant); the GIN index is out of reach too, its condition being outside the MATERIALIZED rows.
VERSION_RANK_SQL = f"""{TERMS_CTE},
m AS MATERIALIZED (SELECT e.id, e.tenant_id, e.document_id, e.version_id, e.{{tsv}} AS tsv
                   FROM documents_indexentry e WHERE e.version_id = %s AND e.tenant_id + 0 = %s),
cand AS (SELECT e.id, e.version_id, e.tsv FROM m e {{join}}
         WHERE {{where}} AND e.tsv @@ to_tsquery('simple', %s) LIMIT %s)
{BM25_SQL}"""


# The tenant's average page in words (its published versions' ``search_terms``, of the first
# LENGTH_SAMPLE): the page length norm's unit, the same on both databases.
PAGE_LENGTH_SQL = """
SELECT avg(p.search_terms) FROM (SELECT v.search_terms FROM documents_document d
JOIN documents_documentversion v ON v.id = d.published_version_id
WHERE d.tenant_id = %s AND v.search_terms > 0 LIMIT %s) p
"""


# In a tenant of LARGE_TENANT entries or more (DF_CAP: where counting one term may read DF_CAP
# entries, each from the table to check its tenant) what a search reads besides its candidates
# moves little from one search to the next: each process reuses for REUSE_SECONDS a term's count
# of entries (key: the term) and the average page (key: ""), as ``tenant_rows`` reuses the
# tenant's count and average length and ``common_terms`` the column's statistics. At 1M chunks
# counting took about 20 ms a search, as long as ranking its candidates (bench/README.md); the
# indexing stage's probe counts the words of every new document too. A smaller tenant's are
# read on every search, exact after every change.
LARGE_TENANT = DF_CAP
REUSE_SECONDS = 60.0
_large_tenant: dict[Any, tuple[float, float]] = {}
LARGE_TENANT_KEYS = 100_000


def _key(tenant_id: int, term: str) -> tuple[Any, ...]:
    return (connection.settings_dict.get("HOST"), connection.settings_dict.get("NAME"), tenant_id, term)


def _reused(key: tuple[Any, ...]) -> float | None:
    cached = _large_tenant.get(key)
    return cached[1] if cached is not None and time.monotonic() - cached[0] <= REUSE_SECONDS else None


def _remember(values: dict[tuple[Any, ...], float]) -> None:
    if len(_large_tenant) + len(values) > LARGE_TENANT_KEYS:
        _large_tenant.clear()  # bounded memory; the next searches read their counts again
    now = time.monotonic()
    _large_tenant.update((key, (now, value)) for key, value in values.items())


def average_page(tenant_id: int, entries: int) -> float:
    """The tenant's average published version in words, title once (0 when none is known: then
    every page counts as of average length). ``entries``: the tenant's index entries as its
    ranking counted them; from ``LARGE_TENANT`` on the average is reused (``_large_tenant``)."""
    reused = _reused(_key(tenant_id, "")) if entries >= LARGE_TENANT else None
    if reused is not None:
        return reused
    [(length,)] = fetch(PAGE_LENGTH_SQL, [tenant_id, LENGTH_SAMPLE])
    if entries >= LARGE_TENANT:
        _remember({_key(tenant_id, ""): float(length or 0.0)})
    return float(length or 0.0)


def _counted(tenant_id: int, terms: list[str], large: bool) -> dict[str, int]:
    """{term: the tenant's entries holding it, counted up to DF_CAP} for ``terms``; in a
    ``large`` tenant from the process's reuse where it has them."""
    reused = {t: _reused(_key(tenant_id, t)) for t in terms} if large else {}
    known = {t: int(df) for t, df in reused.items() if df is not None}
    missing = [t for t in terms if t not in known]
    if missing:
        [(dfs,)] = fetch(DF_SQL.format(tsv=TSV), [tenant_id, DF_CAP, [tsquery([t]) for t in missing]])
        counts = {t: int(d) for t, d in zip(missing, dfs or [], strict=True)}
        if large:
            _remember({_key(tenant_id, t): float(d) for t, d in counts.items()})
        known.update(counts)
    return known


RECORD_VERSION_SQL = f"""
UPDATE documents_documentversion SET search_title = %s, search_terms = (
    SELECT sum({term_count("e.search_text")}) - (count(*) - 1) * %s
    FROM documents_indexentry e WHERE e.version_id = %s)
WHERE id = %s
"""


def record_version(version_id: uuid.UUID, search_title: str) -> None:
    """Keep what the page part of the full-text ranking reads of a version: ``search_title``, the
    words its entries' search texts open with, and the words of its entries with those counted
    once (from the entries written so far: run again after each batch)."""
    version = uuid_value(version_id)
    execute(RECORD_VERSION_SQL, [search_title, len(search_title.split()), version, version])


def tenant_rows(tenant_id: int) -> tuple[int, float]:
    """The tenant's index entries, counted up to ``N_CAP``, and their average length in words (of
    the first ``LENGTH_SAMPLE``). Reused for ``COMMON_TERMS_TTL``: the count once it reaches the
    cap, the average unless the count moved below ``LENGTH_SAMPLE`` (where the sample is the
    whole tenant). Both move the score of every entry alike. With ``B`` at 0 the average is not
    read (1.0): the formula multiplies it by nothing, and reading it took a sample of up to
    ``LENGTH_SAMPLE`` search texts on every search while the tenant grows (a bulk load's probes)."""
    key = (connection.settings_dict.get("HOST"), connection.settings_dict.get("NAME"), tenant_id)
    now = time.monotonic()
    cached = _tenant_rows.get(key)
    stale = cached is None or now - cached[0] > COMMON_TERMS_TTL
    if cached is not None and not stale and cached[1] >= N_CAP:
        return cached[1], cached[2]
    [(n,)] = fetch(COUNT_SQL, [tenant_id, N_CAP])
    if cached is not None and not stale and (n == cached[1] or min(n, cached[1]) >= LENGTH_SAMPLE):
        _tenant_rows[key] = (cached[0], int(n), cached[2])
    elif not B:
        _tenant_rows[key] = (now, int(n), 1.0)
    else:
        [(length,)] = fetch(LENGTH_SQL, [tenant_id, LENGTH_SAMPLE])
        _tenant_rows[key] = (now, int(n), max(float(length or 0), 1.0))
    return _tenant_rows[key][1], _tenant_rows[key][2]


_tenant_rows: dict[Any, tuple[float, int, float]] = {}


def postgres_lexical(scope: Scope, tokens: list[str], limit: int) -> Ranked:
    """The scope's best ``limit`` entries for ``tokens`` by BM25 (PostgreSQL)."""
    if scope.version_id is not None:
        return version_lexical(scope, tokens, limit)
    return tenant_lexical(scope, tokens, limit)


def tenant_lexical(scope: Scope, tokens: list[str], limit: int) -> Ranked:
    """``postgres_lexical`` through the tenant's full-text index: the matching rows of the tenant,
    then the scope."""
    scoring = _scoring(scope, tokens)
    if scoring is None:
        return []
    where, params = scope_sql(scope)
    if scoring.rare:
        # Each selecting term is in fewer than DF_CAP of the tenant's rows: take their rows from
        # the GIN index first, then the scope. Left to itself the planner may go through the
        # scope's documents and test every one of their entries' text instead (10% of 1M
        # chunks is 100,000 tests).
        sql = RARE_RANK_SQL.format(tsv=TSV, join=JOIN_DOCUMENT, where=where)
        args = [*scoring.terms_cte, scope.tenant_id, scoring.selecting, *params]
    else:
        sql = RANK_SQL.format(tsv=TSV, join=JOIN_DOCUMENT, where=where)
        args = [*scoring.terms_cte, *params, scoring.selecting]
    args += [SCAN_CAP, *scoring.bm25(limit)]
    return [(int(i), float(s)) for i, s in fetch(sql, args)]


def version_lexical(scope: Scope, tokens: list[str], limit: int) -> Ranked:
    """``postgres_lexical`` for one version (the indexing stage's probe): the same BM25, with the
    tenant's word frequencies, over that version's entries only. Through the tenant's full-text
    index a word every document shares reads thousands of the tenant's rows to find a few."""
    assert scope.version_id is not None
    scoring = _scoring(scope, tokens)
    if scoring is None:
        return []
    where, params = scope_sql(scope)
    sql = VERSION_RANK_SQL.format(tsv=TSV, join=JOIN_DOCUMENT, where=where)
    args = [*scoring.terms_cte, uuid_value(scope.version_id), scope.tenant_id, *params, scoring.selecting]
    args += [SCAN_CAP, *scoring.bm25(limit)]
    return [(int(i), float(s)) for i, s in fetch(sql, args)]


@dataclass(frozen=True)
class _Scoring:
    terms: list[str]  # the scoring terms, each as a tsquery
    idf: list[float]
    rare: bool  # each term is in fewer than DF_CAP of the tenant's rows
    average_length: float  # the tenant's, in words
    average_page: float  # the tenant's published version, in words (its title once)

    @property
    def selecting(self) -> str:
        """The tsquery matching any scoring term."""
        return " | ".join(self.terms)

    @property
    def terms_cte(self) -> list[Any]:
        """``TERMS_CTE``'s parameters."""
        return [self.terms, self.idf]

    def bm25(self, limit: int) -> list[Any]:
        """``BM25_SQL``'s parameters."""
        return [*([self.selecting] if B else []), self.average_length, self.average_page, limit]


def _scoring(scope: Scope, tokens: list[str]) -> _Scoring | None:
    """How the tenant scores ``tokens`` (``scoring_terms`` over its word frequencies); None when
    no term of the query is in the tenant."""
    n, average_length = tenant_rows(scope.tenant_id)
    # In a large tenant (N_CAP rows or more), a term among the column's most common lexemes is
    # not counted: counting it would read its posting list of up to every row (the GIN index
    # cannot stop at DF_CAP), and the statistics say it is in more rows than the cap anyway
    # (or how many). Rarer terms are counted: their posting lists are short. A small tenant's
    # terms are all counted (exact, and cheap through the tenant's own rows).
    estimated: dict[str, int] = {}
    if n >= N_CAP:
        rows_with = common_terms()
        estimated = {t: min(DF_CAP, max(1, round(rows_with[t]))) for t in tokens if t in rows_with}
    counted = [t for t in tokens if t not in estimated]
    df_of = {**estimated, **_counted(scope.tenant_id, counted, large=n >= LARGE_TENANT)}
    # A count that reached its cap is common too: past the cap the true frequency is unknown.
    scoring = scoring_terms(n, df_of, tokens)
    if not scoring:
        return None
    return _Scoring(
        terms=[tsquery([t]) for t, _ in scoring],
        idf=[w for _, w in scoring],
        rare=all(df_of[t] < DF_CAP for t, _ in scoring),
        average_length=average_length,
        average_page=average_page(scope.tenant_id, n),
    )


def fetch(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def execute(sql: str, params: list[Any]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
