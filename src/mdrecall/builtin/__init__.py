"""The builtin engine: a SQLite index (FTS5, sqlite-vec, an embedding cache) of a workspace's Markdown."""
