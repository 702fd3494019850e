"""One module per pane or modal of the dashboard."""
