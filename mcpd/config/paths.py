"""Where mcpd keeps things by default, per platformdirs."""

from __future__ import annotations

from pathlib import Path

import platformdirs

APP = "mcpd"


def default_config_path() -> Path:
    return platformdirs.user_config_path(APP) / "config.toml"


def default_runtime_dir() -> Path:
    return platformdirs.user_runtime_path(APP)


def default_state_dir() -> Path:
    return platformdirs.user_state_path(APP)
