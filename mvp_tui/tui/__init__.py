"""The Textual application: screens and the bridge from engine events to widgets."""
