"""Configuration: structs (``model``), file loading (``load``) and default paths (``paths``)."""
