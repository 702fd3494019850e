"""One module per `mvp-tui` subcommand: `add_arguments(parser)` and `run(config, args)`."""
