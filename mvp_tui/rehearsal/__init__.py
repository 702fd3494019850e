"""`mvp-tui rehearse`: the whole lifecycle offline, against a simulated marketplace (the
fake Vast.ai server, in-process on loopback) with this machine as the rented node."""
