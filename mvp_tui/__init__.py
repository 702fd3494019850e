"""mvp-tui: lease a GPU, serve a model, stream tokens, tear down — from one dashboard."""

__version__ = "0.1.0"
