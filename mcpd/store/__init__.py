"""Durable state in one SQLite file: the thread that owns it (``db``), call and capability records
with their report queries (``usage``), and the trust gate's pinned tool definitions (``pins``)."""
