"""Plugging mdrecall into the agents people use (docs/hosts/): their config files (``connect``), their
hooks (``hook recall|flush|capture``) and their conversation exports (``import-chats``).

* :mod:`~mdrecall.hosts.targets` — each host: where its config lives, its format, the entry it needs;
* :mod:`~mdrecall.hosts.jsonc` and :mod:`~mdrecall.hosts.tomlfile` — editing JSON/JSONC and TOML
  files in place, every byte outside the entry kept;
* :mod:`~mdrecall.hosts.connect` — planning, checking, showing and writing one connect/disconnect;
* :mod:`~mdrecall.hosts.hooks` — what each hook reads and prints, failing open;
* :mod:`~mdrecall.hosts.exports` — ChatGPT and Claude.ai data exports into transcripts.

The hosts' own session logs (Claude Code, Codex CLI) are a core source, :mod:`mdrecall.sources.hostlogs`.
"""
