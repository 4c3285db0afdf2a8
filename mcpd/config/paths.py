"""Where mcpd keeps things by default, per platformdirs."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import platformdirs

APP = "mcpd"


def default_config_path() -> Path:
    return platformdirs.user_config_path(APP) / "config.toml"


def default_runtime_dir() -> Path:
    # Without XDG_RUNTIME_DIR platformdirs falls back to /tmp/runtime-$UID and warns; the
    # fallback is fine for us (the directory is created 0700), the warning is noise.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return platformdirs.user_runtime_path(APP)


def default_socket_path() -> Path:
    """``$MCPD_SOCKET``, else ``mcpd.sock`` in the user runtime dir."""
    override = os.environ.get("MCPD_SOCKET")
    return Path(override) if override else default_runtime_dir() / "mcpd.sock"


def default_state_dir() -> Path:
    return platformdirs.user_state_path(APP)
