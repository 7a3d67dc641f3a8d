"""The Postgres store in a forget: this agent's rows of the touched files, their cached vectors, VACUUM.

Used when ``backend: postgres``, or when the workspace's config still names a store
(``postgres.dsn``: an agent moved off it keeps its rows there). Rows are deleted as the agent
(row-level security decides what it may delete: its own rows); the backend in use re-indexes the
files' new text right after. A DELETE only marks tuples dead, and even a plain VACUUM leaves the
keyword index (GIN) holding the forgotten words, so the tables are rewritten with
``VACUUM (FULL, ANALYZE)``: new files for the heap, its TOAST and every index, the old ones
truncated at commit. That needs the tables' owner (or, on PostgreSQL 17+, the ``pg_maintain`` role):
``postgres.provision`` connects as the owner; an agent's own role is told so in the report (the
owner runs the same statement). ``ANALYZE`` replaces the sampled values statistics keep; the old
statistics rows are vacuumed too when the role may (a superuser or ``pg_maintain``).

Outside mdrecall's reach, and said so in docs/forgetting.md: the server's write-ahead log and base
backups keep the bytes until they are recycled.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mdrecall.forget.index import Affected
from mdrecall.forget.report import ForgetReport, Remaining, StoreReport

if TYPE_CHECKING:
    from mdrecall.backends.postgres.store import PgStore
    from mdrecall.contract import MemorySearchManager

TABLES = ("chunks", "files", "skipped_files", "embedding_cache")


class PostgresEraser:
    def __init__(self, store: PgStore, owned: bool, entry: StoreReport) -> None:
        self.store = store
        self.owned = owned  # opened here (another backend is in use): closed when done
        self.entry = entry
        self.hashes: set[str] = set()

    @classmethod
    def for_manager(cls, manager: MemorySearchManager, report: ForgetReport) -> PostgresEraser | None:
        if manager.backend == "postgres":
            store = getattr(manager, "store", None)
            if store is None:
                return None
            return cls(store, False, report.store("postgres", _where(store)))
        settings = manager.config.postgres
        if not settings.dsn:
            return None
        from mdrecall.backends.postgres.store import PgStore

        opened = PgStore(settings, application_name="mdrecall:forget")
        return cls(opened, True, report.store("postgres", _where(opened)))

    def remove(self, affected: Affected) -> None:
        """Delete this agent's rows of the touched files (the one in use re-indexes them next)."""
        from mdrecall.backends.postgres.schema import SCHEMA

        ident = self.store.identity
        chunks = others = 0
        for rel, lines in affected.items():
            with self.store.connection() as conn:
                found = conn.execute(
                    f"SELECT start_line, end_line, embed_hash FROM {SCHEMA}.chunks WHERE team_id = %s AND agent_id = %s AND path = %s",
                    (ident.team_id, ident.agent_id, rel),
                ).fetchall()
            for start, end, embed_hash in found:
                if lines is None or any(start <= n <= end for n in lines):
                    chunks += 1
                    if embed_hash:
                        self.hashes.add(str(embed_hash))
                else:
                    others += 1
            self.store.remove_file(rel)
        self.entry.add("chunks holding the lines", chunks)
        if others:
            self.entry.notes.append(f"{others} other chunk(s) of the same files removed too, re-indexed from the new text")

    def finish(self, needles: Sequence[str], report: ForgetReport) -> None:
        """Drop the forgotten chunks' cached vectors, rewrite the tables (see the module docstring),
        then ask the store whether any row of this agent still holds a forgotten text."""
        from mdrecall.backends.postgres.schema import SCHEMA

        try:
            if self.hashes:
                with self.store.connection() as conn:
                    cur = conn.execute(f"DELETE FROM {SCHEMA}.embedding_cache WHERE hash = ANY(%s)", (sorted(self.hashes),))
                    self.entry.add("cached vectors", max(0, cur.rowcount))
            self._vacuum()
            ident = self.store.identity
            with self.store.connection() as conn:
                for needle in needles:
                    found = conn.execute(
                        f"SELECT 'chunks', path FROM {SCHEMA}.chunks WHERE team_id = %s AND agent_id = %s "
                        "AND strpos(lower(text), lower(%s)) > 0 "
                        f"UNION ALL SELECT 'files', path FROM {SCHEMA}.files WHERE team_id = %s AND agent_id = %s "
                        "AND strpos(lower(coalesce(content, '')), lower(%s)) > 0 LIMIT 5",
                        (ident.team_id, ident.agent_id, needle, ident.team_id, ident.agent_id, needle),
                    ).fetchall()
                    report.remaining.extend(Remaining(f"postgres {table} row of {path}", needle) for table, path in found)
        finally:
            if self.owned:
                self.store.close()

    def _vacuum(self) -> None:
        import psycopg

        from mdrecall.backends.postgres.schema import SCHEMA

        settings = self.store.settings
        notices: list[str] = []
        with psycopg.connect(settings.dsn or "", autocommit=True, application_name="mdrecall:forget") as conn:
            conn.add_notice_handler(lambda diag: notices.append(str(diag.message_primary or "")))
            conn.execute(f"SET lock_timeout = {int(settings.lockTimeoutMs)}")
            tables = ", ".join(f"{SCHEMA}.{t}" for t in TABLES)
            try:
                conn.execute(f"VACUUM (FULL, ANALYZE) {tables}")
            except psycopg.errors.LockNotAvailable:
                self._not_vacuumed(f"the tables stayed busy for {settings.lockTimeoutMs} ms")
                return
            denied = [n for n in notices if "permission denied" in n or "skipping" in n]
            if denied:
                self._not_vacuumed("this role may not VACUUM them (it needs the owner, or pg_maintain on PostgreSQL 17+)")
                return
            self.entry.notes.append("tables rewritten (VACUUM FULL, ANALYZE)")
            if _may_vacuum_catalogs(conn):
                conn.execute("VACUUM (FULL) pg_catalog.pg_statistic")
                self.entry.notes.append("old statistics vacuumed")

    def _not_vacuumed(self, why: str) -> None:
        from mdrecall.backends.postgres.schema import SCHEMA

        tables = ", ".join(f"{SCHEMA}.{t}" for t in TABLES)
        self.entry.notes.append(
            f"NOT vacuumed: {why}; deleted rows keep their bytes in the table files until the owner runs "
            f"VACUUM (FULL, ANALYZE) {tables}"
        )


def _where(store: Any) -> str:
    ident = store.identity
    return f"agent {ident.agent_id} of team {ident.team_id}"


def _may_vacuum_catalogs(conn: Any) -> bool:
    row = conn.execute(
        "SELECT rolsuper OR EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pg_maintain' AND pg_has_role(current_user, oid, 'MEMBER')) "
        "FROM pg_roles WHERE rolname = current_user"
    ).fetchone()
    return bool(row and row[0])
