"""The warm path: one-shot ``search``, ``get`` and ``status`` answered by a running daemon.

``mdrecall watch`` keeps the workspace's index open (imports done, the model loaded, vectors in
memory) and listens on a Unix socket (:mod:`.server`); a one-shot command first asks it
(:mod:`.client`, which imports only the standard library) and runs the command itself when no
daemon answers. The daemon runs the client's command line through the same Click commands, in the
client's working directory and with the client's ``MDRECALL_WORKSPACE``/``MDRECALL_SESSION_KEY``,
and sends back its exit code and output, so both paths print the same bytes.

Who may ask: the socket lives in a directory only its user can enter (0700, checked, never a
symlink), the socket itself is 0600, and the daemon checks every peer's uid (``SO_PEERCRED``)
before reading a byte. When it answers: same protocol and code (:func:`.protocol.build_id`), same
workspace, the same effective configuration (``-c`` overrides, config files, provider) and the same
values of the environment variables that configure mdrecall. Anything else (no daemon, a stale
socket, another version, another configuration, a daemon that is slow to take the request) and
the client runs the command itself. docs/cli.md, "The warm path", has the rules and the figures.
"""
