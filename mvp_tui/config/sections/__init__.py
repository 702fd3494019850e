"""One settings class per config section; each field is one key (see `mvp_tui/config/spec.py`)."""
