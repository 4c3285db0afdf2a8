"""The daemon: wiring, signals and logging."""
