"""The dashboard's open-files limit, raised at start: every lease, SSH session, provider call
and prompt RPC connection is a descriptor, and a soft limit of 1024 is a low floor for a
process that local users can open connections to (the prompt RPC caps those that have not
shown its token; the rest of the room is the dashboard's own)."""

from __future__ import annotations

OPEN_FILES_CEILING = 65536  # enough for any run; past it select()-era code gains nothing


def raise_open_files_limit() -> int | None:
    """Raise the soft RLIMIT_NOFILE toward the hard limit (at most OPEN_FILES_CEILING);
    the soft limit now, or None where the platform has no such limit. Never lowers it and
    never fails: a limit the kernel refuses stays as it was."""
    try:
        import resource
    except ImportError:  # not POSIX
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = OPEN_FILES_CEILING if hard == resource.RLIM_INFINITY else min(hard, OPEN_FILES_CEILING)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            return soft
        return target
    return soft
