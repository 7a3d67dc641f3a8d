"""The memory tools over the Model Context Protocol: :mod:`mdrecall.mcp.server`."""

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
DEFAULT_PATH = "/mcp"
