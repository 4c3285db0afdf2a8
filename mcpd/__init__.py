"""mcpd: one supervised set of MCP servers, shared by every agent on the machine."""

import importlib
import sys

__version__ = "0.1.0"


def import_without(module: str, hidden: str) -> None:
    """Import ``module`` with the optional package ``hidden`` out of its sight (unless either is
    imported already); whatever imports ``hidden`` later gets it as usual."""
    if module in sys.modules or hidden in sys.modules:
        return
    sys.modules[hidden] = None  # type: ignore[assignment]
    try:
        importlib.import_module(module)
    finally:
        del sys.modules[hidden]


# msgspec imports typing_extensions when it is installed (the mcp SDK needs it), and that pulls in
# inspect, ast and dis: ~1.4 MB and tens of ms in every bridge and CLI process. On Python 3.11+
# msgspec's fallback to `typing` is complete.
import_without("msgspec", "typing_extensions")
