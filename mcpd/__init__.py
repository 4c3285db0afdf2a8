"""mcpd: one supervised set of MCP servers, shared by every agent on the machine."""

__version__ = "0.1.0"
