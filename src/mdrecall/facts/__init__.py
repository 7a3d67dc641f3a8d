"""Facts that change: the ``memory_history`` agent tool (the history itself is core:
``mdrecall.search.history``; supersession and as-of search live in ``mdrecall.search``)."""
