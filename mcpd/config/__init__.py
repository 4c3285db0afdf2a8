"""Configuration: structs, file loading and default paths."""

from mcpd.config.load import EMBEDDED_SOURCE, embedded_config, load_config
from mcpd.config.model import Config, ConfigIssue, RestartPolicy, ServerConfig

__all__ = [
    "EMBEDDED_SOURCE",
    "Config",
    "ConfigIssue",
    "RestartPolicy",
    "ServerConfig",
    "embedded_config",
    "load_config",
]
