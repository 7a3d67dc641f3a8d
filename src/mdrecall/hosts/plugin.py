"""Wiring: what indexing skipped in the hosts' session logs, as ``status().details["hostLogs"]``."""

from __future__ import annotations

from mdrecall.contract import MemorySearchManager
from mdrecall.plugins import hookimpl


@hookimpl
def manager_opened(manager: MemorySearchManager) -> None:
    from mdrecall.sources.hostlogs import Census, census_path, enabled_hosts

    config = manager.config
    if not enabled_hosts(config):
        return
    census = Census(census_path(manager.workspace))
    manager.add_status_section("hostLogs", lambda: census.summary(config))
