"""The daemon: wiring, signals and logging."""

import mcpd

# structlog loads rich when it is installed (~55 ms and 5 MB before the daemon's first spawn), for
# console tracebacks that mcpd turns off (``logging``: plain tracebacks, no frame locals). This
# package is imported before any daemon module, so the daemon's structlog never sees rich.
mcpd.import_without("structlog.tracebacks", "rich")
