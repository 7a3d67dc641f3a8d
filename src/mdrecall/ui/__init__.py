"""``mdrecall ui``: a local web page to look at an agent's memory (docs/ui.md).

Search with the reasons each hit came back, browse notes and transcripts as the agent sees them, check
the index's health and freshness, review promotion candidates. A shell over the core like the CLI and
the MCP server (nothing in the core imports it), served on loopback behind :mod:`mdrecall.http_guard`
and :mod:`mdrecall.ui.security`.
"""

from mdrecall.ui.app import DEFAULT_HOST, DEFAULT_PORT, UiOptions, build_app, inspector_config, serve

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "UiOptions", "build_app", "inspector_config", "serve"]
