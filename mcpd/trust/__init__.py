"""Trust: the tool-poisoning verifier and pinned tool definitions."""
