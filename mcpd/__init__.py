"""mcpd: one supervised set of MCP servers, shared by every agent on the machine."""

import sys

__version__ = "0.1.0"


def _import_msgspec_lean() -> None:
    # msgspec imports typing_extensions when it is installed (the mcp SDK needs it), and that
    # pulls in inspect, ast and dis: ~1.4 MB and tens of ms in every bridge and CLI process.
    # On Python 3.11+ msgspec's fallback to `typing` is complete, so typing_extensions is hidden
    # for this one import only; whatever imports it later (the SDK, in the daemon) gets it.
    if "msgspec" in sys.modules or "typing_extensions" in sys.modules:
        return
    sys.modules["typing_extensions"] = None  # type: ignore[assignment]
    try:
        import msgspec  # noqa: F401, PLC0415
    finally:
        del sys.modules["typing_extensions"]


_import_msgspec_lean()
