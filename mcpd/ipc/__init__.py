"""The daemon's socket API: bytes -> frames (``framing``) -> messages (``protocol``) -> rpc (``server``)."""
