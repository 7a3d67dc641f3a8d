"""The store's schema: versioned, forward-only migrations, and agent registration.

Everything lives in the ``mdrecall`` schema of the database. Each migration runs once, in its own
transaction, under a transaction-level advisory lock, and is recorded in ``mdrecall.schema_migrations``;
a process that finds the store at a newer version than it knows refuses to write (an older mdrecall
must not write rows a newer schema interprets differently).

Who is who: every agent is a Postgres role (``mdrecall.agents`` maps role -> agent, team). Row-level
security on every table compares a row's ``agent_id``/``team_id`` with the mapping of ``current_user``,
so what an agent's connection can read or write is decided by the database, whatever SQL it sends:
another agent's private rows are invisible and its own writes cannot claim another identity. Agent
roles are members of ``mdrecall_agent``, which holds the table privileges; they own nothing (owners
and superusers bypass row-level security, as always in Postgres).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mdrecall.errors import ConfigError, StoreError

SCHEMA = "mdrecall"
AGENT_GROUP = "mdrecall_agent"
#: Advisory lock key (pg_advisory_xact_lock) taken by every migration run.
MIGRATION_LOCK = 0x6D64_7263_0001

_RLS_TABLES = ("files", "chunks", "skipped_files", "meta", "embedding_cache")


def _base_schema() -> list[str]:
    s, g = SCHEMA, AGENT_GROUP
    own = f"team_id = (SELECT {s}.current_team()) AND agent_id = (SELECT {s}.current_agent())"
    statements = [
        "CREATE EXTENSION IF NOT EXISTS vector",
        f"""DO $$ BEGIN
              IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{g}') THEN CREATE ROLE {g} NOLOGIN; END IF;
            END $$""",
        f"GRANT USAGE ON SCHEMA {s} TO {g}",
        f"GRANT SELECT ON {s}.schema_migrations TO {g}",
        f"""CREATE TABLE {s}.agents (
              role_name name PRIMARY KEY,
              agent_id text NOT NULL,
              team_id text NOT NULL,
              created_at timestamptz NOT NULL DEFAULT now(),
              UNIQUE (team_id, agent_id))""",
        f"ALTER TABLE {s}.agents ENABLE ROW LEVEL SECURITY",
        # An agent sees its own mapping only (not the roster of the team).
        f"CREATE POLICY agents_self ON {s}.agents FOR SELECT TO {g} USING (role_name = current_user)",
        f"GRANT SELECT ON {s}.agents TO {g}",
        # STABLE and wrapped in (SELECT ...) inside the policies: evaluated once per query, not per row.
        f"""CREATE FUNCTION {s}.current_agent() RETURNS text LANGUAGE sql STABLE PARALLEL SAFE
              AS $$ SELECT agent_id FROM {s}.agents WHERE role_name = current_user $$""",
        f"""CREATE FUNCTION {s}.current_team() RETURNS text LANGUAGE sql STABLE PARALLEL SAFE
              AS $$ SELECT team_id FROM {s}.agents WHERE role_name = current_user $$""",
        f"""CREATE TABLE {s}.files (
              team_id text NOT NULL DEFAULT {s}.current_team(),
              agent_id text NOT NULL DEFAULT {s}.current_agent(),
              path text NOT NULL,
              source text NOT NULL,
              hash text NOT NULL,
              mtime bigint NOT NULL,
              size bigint NOT NULL,
              indexed_at bigint NOT NULL,
              visibility text NOT NULL CHECK (visibility IN ('private', 'team')),
              -- The file as indexed, kept for team files only: what other agents' memory_get serves.
              content text,
              PRIMARY KEY (team_id, agent_id, path),
              CHECK (source <> 'sessions' OR visibility = 'private'),
              CHECK (visibility = 'team' OR content IS NULL))""",
        f"""CREATE TABLE {s}.chunks (
              id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
              team_id text NOT NULL DEFAULT {s}.current_team(),
              agent_id text NOT NULL DEFAULT {s}.current_agent(),
              chunk_id text NOT NULL,
              path text NOT NULL,
              source text NOT NULL,
              start_line integer NOT NULL,
              end_line integer NOT NULL,
              hash text NOT NULL,
              model text NOT NULL,
              text text NOT NULL,
              embedding vector,
              embed_hash text,
              fts tsvector NOT NULL,
              visibility text NOT NULL CHECK (visibility IN ('private', 'team')),
              updated_at bigint NOT NULL,
              UNIQUE (team_id, agent_id, chunk_id),
              CHECK (source <> 'sessions' OR visibility = 'private'))""",
        f"CREATE INDEX chunks_file ON {s}.chunks (team_id, agent_id, path)",
        f"CREATE INDEX chunks_fts ON {s}.chunks USING gin (fts)",
        f"""CREATE TABLE {s}.skipped_files (
              team_id text NOT NULL DEFAULT {s}.current_team(),
              agent_id text NOT NULL DEFAULT {s}.current_agent(),
              path text NOT NULL,
              source text NOT NULL,
              reason text NOT NULL,
              mtime bigint NOT NULL,
              size bigint NOT NULL,
              PRIMARY KEY (team_id, agent_id, path))""",
        # agent_id '' holds the team's own keys (its embedding identity).
        f"""CREATE TABLE {s}.meta (
              team_id text NOT NULL DEFAULT {s}.current_team(),
              agent_id text NOT NULL,
              key text NOT NULL,
              value text NOT NULL,
              PRIMARY KEY (team_id, agent_id, key))""",
        f"""CREATE TABLE {s}.embedding_cache (
              team_id text NOT NULL DEFAULT {s}.current_team(),
              provider text NOT NULL,
              model text NOT NULL,
              provider_key text NOT NULL,
              hash text NOT NULL,
              embedding vector NOT NULL,
              dims integer NOT NULL,
              updated_at bigint NOT NULL,
              PRIMARY KEY (team_id, provider, model, provider_key, hash))""",
        f"CREATE INDEX embedding_cache_age ON {s}.embedding_cache (team_id, updated_at)",
        f"""CREATE POLICY chunks_read ON {s}.chunks FOR SELECT TO {g}
              USING (team_id = (SELECT {s}.current_team())
                     AND (agent_id = (SELECT {s}.current_agent()) OR visibility = 'team'))""",
        f"""CREATE POLICY files_read ON {s}.files FOR SELECT TO {g}
              USING (team_id = (SELECT {s}.current_team())
                     AND (agent_id = (SELECT {s}.current_agent()) OR visibility = 'team'))""",
        f"""CREATE POLICY meta_own ON {s}.meta FOR ALL TO {g}
              USING (team_id = (SELECT {s}.current_team()) AND agent_id IN ((SELECT {s}.current_agent()), ''))
              WITH CHECK (team_id = (SELECT {s}.current_team()) AND agent_id IN ((SELECT {s}.current_agent()), ''))""",
        f"""CREATE POLICY cache_team ON {s}.embedding_cache FOR ALL TO {g}
              USING (team_id = (SELECT {s}.current_team())) WITH CHECK (team_id = (SELECT {s}.current_team()))""",
    ]
    for table in ("files", "chunks", "skipped_files"):
        statements.append(f"CREATE POLICY {table}_own ON {s}.{table} FOR ALL TO {g} USING ({own}) WITH CHECK ({own})")
    for table in _RLS_TABLES:
        statements.append(f"ALTER TABLE {s}.{table} ENABLE ROW LEVEL SECURITY")
        statements.append(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {s}.{table} TO {g}")
    # HNSW indexes are created per vector size once a model's size is known. Agents own no table
    # and cannot create indexes; this owner-run function creates exactly one kind of index.
    statements.append(
        f"""CREATE FUNCTION {s}.ensure_vector_index(dims integer, m integer, ef_construction integer)
              RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $fn$
            DECLARE name text := 'chunks_hnsw_' || dims;
            BEGIN
              IF dims < 1 OR dims > 2000 OR m < 2 OR m > 100 OR ef_construction < 4 OR ef_construction > 1000 THEN
                RAISE EXCEPTION 'invalid vector index parameters (%, %, %)', dims, m, ef_construction;
              END IF;
              IF EXISTS (SELECT 1 FROM pg_indexes WHERE schemaname = '{s}' AND indexname = name) THEN
                RETURN false;
              END IF;
              PERFORM pg_advisory_xact_lock({MIGRATION_LOCK} + dims);
              IF EXISTS (SELECT 1 FROM pg_indexes WHERE schemaname = '{s}' AND indexname = name) THEN
                RETURN false;
              END IF;
              EXECUTE format('CREATE INDEX %I ON {s}.chunks USING hnsw ((embedding::vector(%s)) vector_cosine_ops) '
                             'WITH (m = %s, ef_construction = %s) WHERE vector_dims(embedding) = %s',
                             name, dims, m, ef_construction, dims);
              RETURN true;
            END $fn$"""
    )
    # Keyword candidates. Under row-level security Postgres never evaluates a non-leakproof operator
    # such as tsvector @@ tsquery before the policy's conditions, so the GIN index could not be used
    # (a sequential scan: seconds at 1M chunks). This owner-run function applies the same visibility
    # rule explicitly, for the role it is told it acts as, and only when the session's login role
    # really is (a member of) that role: an agent's own login can only ever name itself. Callers join
    # the ids it returns back to ``chunks`` under row-level security, so both checks must pass.
    #
    # Ranking every row that matches any query word costs ~6 µs a row, and a common word matches
    # 5-10 % of the chunks (70 ms at 1M). So, like the max-score pruning of search engines, the
    # candidates are the rows matching a rare term (estimated from the column's statistics) or two of
    # the common ones; only when those give fewer than ten rows are rows matching one common term
    # added, at most ``max_ranked`` of them. Candidates are ranked against the whole query.
    statements.append(f"ALTER TABLE {s}.chunks ALTER COLUMN fts SET STATISTICS 1000")
    visible = """c.team_id = me.team_id AND (c.agent_id = me.agent_id OR c.visibility = 'team')
                  AND (sources IS NULL OR c.source = ANY (sources))
                  AND (transcripts_prefix IS NULL OR c.source <> 'sessions'
                       OR (transcripts_prefix <> '' AND starts_with(c.path, transcripts_prefix)))"""
    statements.append(
        f"""CREATE FUNCTION {s}.keyword_candidates(acting_role name, terms text[], cfg regconfig, k integer,
                                                   sources text[], transcripts_prefix text, max_ranked integer)
              RETURNS TABLE (id bigint, rank real) LANGUAGE plpgsql STABLE SECURITY DEFINER
              SET search_path = pg_catalog, public AS $fn$
            DECLARE
              me record;
              full_q tsquery;
              cand_q tsquery;
              common tsquery[] := '{{}}';
              tq tsquery;
              term text;
              lexeme text;
              total real;
              elems text[];
              freqs real[];
              floor_freq real;
              est real;
              n integer;
              got integer;
            BEGIN
              SELECT a.agent_id, a.team_id INTO me FROM {s}.agents a
               WHERE a.role_name = acting_role AND pg_has_role(session_user, acting_role, 'MEMBER');
              IF NOT FOUND THEN RETURN; END IF;
              SELECT greatest(reltuples, 0) INTO total FROM pg_class WHERE oid = '{s}.chunks'::regclass;
              SELECT st.most_common_elems::text::text[], st.most_common_elem_freqs INTO elems, freqs
                FROM pg_stats st WHERE st.schemaname = '{s}' AND st.tablename = 'chunks' AND st.attname = 'fts';
              -- the frequencies end with min, max and null share: untracked lexemes are rarer than min
              floor_freq := CASE WHEN freqs IS NULL THEN 0 ELSE freqs[array_length(freqs, 1) - 2] END;
              n := greatest(coalesce(array_length(terms, 1), 0), 1);
              FOREACH term IN ARRAY coalesce(terms, '{{}}') LOOP
                tq := to_tsquery(cfg, term);
                CONTINUE WHEN numnode(tq) = 0;  -- stop words only
                full_q := CASE WHEN full_q IS NULL THEN tq ELSE full_q || tq END;
                est := NULL;
                FOR lexeme IN SELECT m[1] FROM regexp_matches(tq::text, '''([^'']*)''', 'g') AS m LOOP
                  est := least(coalesce(est, 1), coalesce(freqs[array_position(elems, lexeme)], floor_freq));
                END LOOP;
                IF coalesce(est, 0) * total <= max_ranked / n THEN
                  cand_q := CASE WHEN cand_q IS NULL THEN tq ELSE cand_q || tq END;
                ELSE
                  common := common || tq;
                END IF;
              END LOOP;
              IF full_q IS NULL THEN RETURN; END IF;
              FOR i IN 1 .. coalesce(array_length(common, 1), 0) LOOP
                FOR j IN i + 1 .. array_length(common, 1) LOOP
                  cand_q := CASE WHEN cand_q IS NULL THEN common[i] && common[j] ELSE cand_q || (common[i] && common[j]) END;
                END LOOP;
              END LOOP;
              got := 0;
              IF cand_q IS NOT NULL THEN
                RETURN QUERY
                  WITH cand AS (SELECT c.id, c.fts FROM {s}.chunks c WHERE c.fts @@ cand_q AND {visible} LIMIT max_ranked)
                  SELECT cand.id, ts_rank_cd(cand.fts, full_q) AS r FROM cand ORDER BY r DESC LIMIT k;
                GET DIAGNOSTICS got = ROW_COUNT;
              END IF;
              -- rows matching one common word only are weak candidates: needed only when few others exist
              IF got < least(k, 10) AND coalesce(array_length(common, 1), 0) > 0 THEN
                RETURN QUERY
                  WITH cand AS (SELECT c.id, c.fts FROM {s}.chunks c
                                WHERE c.fts @@ full_q AND (cand_q IS NULL OR NOT c.fts @@ cand_q) AND {visible}
                                LIMIT max_ranked)
                  SELECT cand.id, ts_rank_cd(cand.fts, full_q) AS r FROM cand ORDER BY r DESC LIMIT k - got;
              END IF;
            END $fn$"""
    )
    statements.append(f"REVOKE ALL ON FUNCTION {s}.keyword_candidates(name, text[], regconfig, integer, text[], text, integer) FROM PUBLIC")
    statements.append(f"GRANT EXECUTE ON FUNCTION {s}.keyword_candidates(name, text[], regconfig, integer, text[], text, integer) TO {g}")
    statements.append(f"REVOKE ALL ON FUNCTION {s}.ensure_vector_index(integer, integer, integer) FROM PUBLIC")
    statements.append(f"GRANT EXECUTE ON FUNCTION {s}.ensure_vector_index(integer, integer, integer) TO {g}")
    return statements


def _term_statistics() -> list[str]:
    """Corpus statistics for calibrated scores (search/relevance.py): how many chunks an agent can
    see and how many of them hold each query term. Owner-run for the same reason as
    ``keyword_candidates``: under row-level security the GIN index cannot serve ``@@``. The same
    visibility rule (own chunks and the team's shared ones, every source), for the role the caller
    acts as and only when its login really is that role. A term's count stops at ``cap`` (a term
    that common weighs little anyway); -1 marks a term the text-search configuration drops."""
    s, g = SCHEMA, AGENT_GROUP
    visible = "c.team_id = me.team_id AND (c.agent_id = me.agent_id OR c.visibility = 'team')"
    return [
        f"""CREATE FUNCTION {s}.term_statistics(acting_role name, terms text[], cfg regconfig, cap integer,
                                                with_total boolean)
              RETURNS TABLE (total bigint, doc_freqs bigint[]) LANGUAGE plpgsql STABLE SECURITY DEFINER
              SET search_path = pg_catalog, public AS $fn$
            DECLARE
              me record;
              tq tsquery;
              term text;
              n bigint;
              dfs bigint[] := '{{}}';
            BEGIN
              SELECT a.agent_id, a.team_id INTO me FROM {s}.agents a
               WHERE a.role_name = acting_role AND pg_has_role(session_user, acting_role, 'MEMBER');
              IF NOT FOUND THEN RETURN; END IF;
              IF with_total THEN
                SELECT count(*) INTO n FROM {s}.chunks c WHERE {visible};
              END IF;
              FOREACH term IN ARRAY coalesce(terms, '{{}}') LOOP
                tq := to_tsquery(cfg, term);
                IF numnode(tq) = 0 THEN
                  dfs := dfs || (-1)::bigint;
                  CONTINUE;
                END IF;
                dfs := dfs || (SELECT count(*) FROM (SELECT 1 FROM {s}.chunks c
                                                         WHERE c.fts @@ tq AND {visible} LIMIT cap) AS hit);
              END LOOP;
              RETURN QUERY SELECT n, dfs;
            END $fn$""",
        f"REVOKE ALL ON FUNCTION {s}.term_statistics(name, text[], regconfig, integer, boolean) FROM PUBLIC",
        f"GRANT EXECUTE ON FUNCTION {s}.term_statistics(name, text[], regconfig, integer, boolean) TO {g}",
    ]


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: Callable[[], list[str]]


#: Append only. Never edit a migration that has shipped: add the next one.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "base schema with row-level security", _base_schema),
    Migration(2, "term statistics for calibrated scores", _term_statistics),
)
LATEST = MIGRATIONS[-1].version


def current_version(conn: Any) -> int:
    """The store's migration level (0: no mdrecall schema yet)."""
    row = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL", (f"{SCHEMA}.schema_migrations",)
    ).fetchone()
    if not row or not row[0]:
        return 0
    row = conn.execute(f"SELECT coalesce(max(version), 0) FROM {SCHEMA}.schema_migrations").fetchone()
    return int(row[0])


def migrate(conn: Any) -> list[int]:
    """Apply pending migrations (needs the store owner's rights); returns the versions applied."""
    applied: list[int] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        conn.execute(
            f"""CREATE TABLE IF NOT EXISTS {SCHEMA}.schema_migrations (
                  version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"""
        )
    for migration in MIGRATIONS:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            done = conn.execute(
                f"SELECT 1 FROM {SCHEMA}.schema_migrations WHERE version = %s", (migration.version,)
            ).fetchone()
            if done:
                continue
            for statement in migration.statements():
                conn.execute(statement)
            conn.execute(
                f"INSERT INTO {SCHEMA}.schema_migrations(version, name) VALUES (%s, %s)",
                (migration.version, migration.name),
            )
            applied.append(migration.version)
    return applied


def check_version(conn: Any) -> int:
    """The store's level; StoreError when it is missing, behind or ahead of this mdrecall."""
    version = current_version(conn)
    if version == LATEST:
        return version
    if version > LATEST:
        raise StoreError(
            f"the Postgres store is at schema version {version}, newer than this mdrecall knows ({LATEST}): upgrade mdrecall"
        )
    raise StoreError(
        f"the Postgres store is at schema version {version}, this mdrecall needs {LATEST}: run "
        "`mdrecall postgres migrate --dsn <owner DSN>` (or set postgres.provision for a development store)"
    )


_ROLE_SAFE = re.compile(r"[^a-z0-9_]")


def role_name_for(agent_id: str, team_id: str) -> str:
    """A valid, unique role name for an agent (63 bytes at most)."""
    base = _ROLE_SAFE.sub("_", f"{team_id}_{agent_id}".lower())[:40]
    digest = hashlib.sha256(f"{team_id}\x00{agent_id}".encode()).hexdigest()[:10]
    return f"mdr_{base}_{digest}"


def add_agent(
    conn: Any,
    agent_id: str,
    team_id: str,
    *,
    role: str | None = None,
    login: bool = True,
    password: str | None = None,
    grant_to: str | None = None,
) -> str:
    """Register an agent (owner's connection): create its role if missing, map it, return the role.

    ``grant_to``: also let that role ``SET ROLE`` to the agent (the provisioning owner's login).
    """
    from psycopg import sql

    role = role or role_name_for(agent_id, team_id)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        mapped = conn.execute(
            f"SELECT role_name FROM {SCHEMA}.agents WHERE agent_id = %s AND team_id = %s", (agent_id, team_id)
        ).fetchone()
        if mapped and mapped[0] != role:
            raise ConfigError(f"agent {agent_id!r} of team {team_id!r} is already mapped to role {mapped[0]!r}")
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
        if not exists:
            options: sql.Composable = sql.SQL("LOGIN" if login else "NOLOGIN")
            if password is not None:
                options = sql.SQL("{} PASSWORD {}").format(options, sql.Literal(password))
            conn.execute(sql.SQL("CREATE ROLE {} {}").format(sql.Identifier(role), options))
        conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(AGENT_GROUP), sql.Identifier(role)))
        if grant_to:
            conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(role), sql.Identifier(grant_to)))
        conn.execute(
            f"INSERT INTO {SCHEMA}.agents(role_name, agent_id, team_id) VALUES (%s, %s, %s) "
            "ON CONFLICT (role_name) DO NOTHING",
            (role, agent_id, team_id),
        )
        row = conn.execute(f"SELECT agent_id, team_id FROM {SCHEMA}.agents WHERE role_name = %s", (role,)).fetchone()
        if row and (row[0], row[1]) != (agent_id, team_id):
            raise ConfigError(f"role {role!r} already belongs to agent {row[0]!r} of team {row[1]!r}")
    return role


__all__ = ["AGENT_GROUP", "LATEST", "MIGRATIONS", "SCHEMA", "add_agent", "check_version", "current_version",
           "migrate", "role_name_for"]
