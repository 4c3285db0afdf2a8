"""The SDK adapter (``sdk``), imported in a worker thread when a remote server first needs it.

Importing the mcp SDK costs most of a second of CPU (its client package also loads the server
stack: starlette, uvicorn, sse_starlette; and pydantic models of two protocol revisions), and
only remote (streamable HTTP) servers use it: stdio children have a session of mcpd's own
(``stdio_session``). So a daemon whose servers are all local never imports it, and an actor of a
remote server awaits ``SDK.wait_loaded()`` before it connects: the first to ask starts the import
in a worker thread, off the event loop.

The supervisor's modules import ``sdk`` from here, not ``mcpd.supervisor.sdk``: the type checker
sees the adapter module itself, the running code a stand-in that hands each attribute on to it.
Code that reaches ``sdk`` before ``wait_loaded()`` imports it in place, as a plain import would:
slower, never wrong (``loaded()`` tells whether it is there without importing it). It is PEP
810's ``lazy from mcpd.supervisor import sdk``, with the import done off the event loop.
"""

from __future__ import annotations

import importlib
import threading
from types import ModuleType
from typing import TYPE_CHECKING, Any

import anyio

__all__ = ["SDK", "SdkLoader", "sdk"]

_ADAPTER = "mcpd.supervisor.sdk"


class SdkLoader:
    """Imports the adapter once, in a worker thread; ``wait_loaded()`` waits for it (any number of tasks)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None
        self._lock = threading.Lock()
        self._loading: anyio.Event | None = None

    def _import(self) -> None:
        with self._lock:  # one import at a time, whichever loop asked (tests run one loop each)
            if self._module is None:
                self._module = importlib.import_module(self._name)

    async def wait_loaded(self) -> None:
        """Wait until the adapter is imported; the first caller starts the import, the others wait.

        Raises what the import raised (an SDK that is missing or broken); the next call tries again.
        No timeout: an import is bounded work, never a wait on anything outside the process.
        """
        while self._module is None:
            loading = self._loading
            if loading is not None:
                await loading.wait()
                continue
            self._loading = loading = anyio.Event()
            try:
                # Not abandoned on cancel: a half-done import must finish before anyone uses it.
                await anyio.to_thread.run_sync(self._import)
            finally:
                self._loading = None
                loading.set()

    def loaded(self) -> bool:
        """The adapter is imported (so its names can be used without importing it now)."""
        return self._module is not None

    def module(self) -> ModuleType:
        """The adapter now: imported in place if ``wait_loaded()`` has not finished yet."""
        if self._module is None:
            self._import()
        assert self._module is not None
        return self._module


class _Stand:
    """Stands for the adapter module: every attribute is the module's own."""

    def __init__(self, loader: SdkLoader) -> None:
        self._loader = loader

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader.module(), name)


SDK = SdkLoader(_ADAPTER)
"""The one loader of the process (an import happens once per process, whatever the event loop)."""

if TYPE_CHECKING:
    from mcpd.supervisor import sdk
else:
    sdk = _Stand(SDK)
