"""An example mdrecall backend (docs/backends.md walks through it)."""

from mdrecall_notes_backend.manager import NotesManager

__all__ = ["NotesManager"]
