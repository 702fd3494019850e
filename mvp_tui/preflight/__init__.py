"""`mvp-tui check`'s checks: each answers one question a first run would otherwise answer
late (the config, each provider's key, the SSH identity, the local engine, the state dir,
the clock) with a `Check`: passed, failed with the fix, or skipped where it does not apply.
Nothing here rents, registers or writes anything but the state dir's probe."""
