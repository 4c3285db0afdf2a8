"""Helpers for testing with mcpd: a misbehaving-on-demand fixture server, and more to come."""
