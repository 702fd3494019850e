"""The node agent as one file: a zipapp of `mvp_tui/node/` and the shared modules it imports.

Every route to a node (SFTP into the run directory, a Docker container's stdin, the local
provider's child) ships this one file and runs `python3 agent.pyz`; over SSH the same file
also follows and stops the agent (`python3 -S agent.pyz follow|stop ...`,
mvp_tui/node/follow.py). Its bytes depend only on
the sources: members in a fixed order, each with a fixed date and mode, so one tree always
builds the same file. It is named by the sha256 of its inputs and kept under the user's cache
(`$XDG_CACHE_HOME/mvp-tui/agent/<sha>.pyz`, else `~/.cache/...`), written atomically, so a
start-up that finds it reads the sources, hashes them and builds nothing.

The name alone proves nothing (a restored CI cache, a sync tool or a shared cache dir can put
any file there, and it runs with every key the agent gets), so a found file is used only when
it is a regular file of ours, not a link, in a directory of ours that no one else may write
(0700), and its bytes are this build: every member, in order, inflates to the source's bytes,
with nothing else in the file. Anything else is built again over it.

Standard library only, as the node needs nothing else and this runs on the dashboard's path
to every lease.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import stat
import tempfile
import zipfile
from pathlib import Path

from mvp_tui.errors import UserError

PACKAGE_ROOT = Path(__file__).resolve().parent  # .../mvp_tui
# The modules outside mvp_tui/node/ that the agent imports: standard-library-only ones the app
# uses too (tests/foundation/test_layers.py holds the node package to exactly these).
SHARED_MODULES = ("__init__.py", "node_protocol.py", "secrets.py", "untrusted.py")
# Each provider package's node part (`providers/<name>/node_api.py`: what the node's switch
# calls on its own instance), with the two package markers above it, which import nothing.
NODE_API = "node_api.py"
# The zip's entry point. Plain enough for any Python to compile, so an older one than the
# agent supports says so. It imports mvp_tui from the zip itself, compiling each module once:
# zipimport compiles each twice (its get_filename compiles to learn the path), which cost
# the agent ~90 ms of CPU at every start. {modules} is the zip's {module: is_package}.
MAIN = """\
import sys
from importlib.machinery import ModuleSpec

if sys.version_info < (3, 8):
    sys.exit("mvp-node needs Python 3.8 or later; this is " + sys.version.split()[0])
ARCHIVE = __loader__.archive  # the zipimporter that found this file, its directory read
MODULES = {modules}


class ZipSource:
    data = __loader__.get_data

    def find_spec(self, name, path=None, target=None):
        if name not in MODULES:
            return None
        inner = name.replace(".", "/") + ("/__init__.py" if MODULES[name] else ".py")
        spec = ModuleSpec(name, self, origin=ARCHIVE + "/" + inner, is_package=MODULES[name])
        spec.has_location = True
        if MODULES[name]:
            spec.submodule_search_locations = [ARCHIVE + "/" + name.replace(".", "/")]
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        origin = module.__spec__.origin
        exec(compile(self.data(origin), origin, "exec", dont_inherit=True), module.__dict__)

    def get_source(self, name):  # for tracebacks (linecache)
        return self.data(self.find_spec(name).origin).decode("utf-8")


sys.meta_path.insert(0, ZipSource())
from mvp_tui.node.__main__ import run

sys.exit(run())
"""
BUILD_FORMAT = b"mvp-agent-zipapp 1\n"  # bump when the layout below changes
FIXED_DATE = (1980, 1, 1, 0, 0, 0)  # the zip format's earliest date
FILE_MODE = 0o644 << 16
SUFFIX = ".pyz"


def agent_members(
    root: Path = PACKAGE_ROOT, providers: Path | None = None
) -> list[tuple[str, bytes]]:
    """The zip's members as (name inside the zip, bytes), in the order they are written.
    `providers`: the providers' folder (installed as mvp_tui.providers; default: where it
    imports from)."""
    files = [(f"mvp_tui/{name}", root / name) for name in SHARED_MODULES]
    files += sorted((f"mvp_tui/node/{p.name}", p) for p in (root / "node").glob("*.py"))
    files += provider_node_parts(providers or providers_dir())
    modules = {_module_name(name): name.endswith("/__init__.py") for name, _ in files}
    members = [("__main__.py", MAIN.format(modules=modules).encode())]
    members += [(name, path.read_bytes()) for name, path in files]
    return members


def providers_dir() -> Path:
    """Where mvp_tui.providers is read from (the repo's providers/ in a checkout)."""
    spec = importlib.util.find_spec("mvp_tui.providers")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("mvp_tui.providers is not installed: the node agent needs its node parts")
    return Path(next(iter(spec.submodule_search_locations)))


def provider_node_parts(providers: Path) -> list[tuple[str, Path]]:
    """(name inside the zip, file) for each provider package's node part and the package
    markers above it, in a fixed order."""
    parts = [("mvp_tui/providers/__init__.py", providers / "__init__.py")]
    for package in sorted(p.parent for p in providers.glob(f"*/{NODE_API}")):
        parts.append((f"mvp_tui/providers/{package.name}/__init__.py", package / "__init__.py"))
        parts.append((f"mvp_tui/providers/{package.name}/{NODE_API}", package / NODE_API))
    return parts


def _module_name(member: str) -> str:
    """`mvp_tui/node/main.py` → `mvp_tui.node.main`; a package's `__init__.py` → the package."""
    return member.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def content_hash(members: list[tuple[str, bytes]]) -> str:
    """The sha256 of the build's inputs: the format, then each member's name and bytes."""
    digest = hashlib.sha256(BUILD_FORMAT)
    for name, data in members:
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def zip_bytes(members: list[tuple[str, bytes]]) -> bytes:
    """The zipapp's bytes: deflated members, fixed dates and modes, no shebang (the node
    runs it as `python3 agent.pyz`, whichever Python that is)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=FIXED_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = FILE_MODE
            info.create_system = 3  # Unix, whatever builds it, so the bytes match everywhere
            archive.writestr(info, data, compresslevel=9)
    return out.getvalue()


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mvp-tui" / "agent"


def agent_zip(root: Path = PACKAGE_ROOT, directory: Path | None = None) -> Path:
    """The built agent for the sources under `root`: found in the cache, else built there.

    Each call reads and hashes the sources and checks a cached file against them (a few
    milliseconds), so an edited module is a new build even within one process, and a file
    that is not this build is replaced; only a miss compresses and writes.
    """
    members = agent_members(root)
    folder = private_dir(directory or cache_dir())
    path = folder / f"{content_hash(members)}{SUFFIX}"
    if not holds_build(path, members):
        _write_atomically(path, zip_bytes(members))
    return path


def private_dir(folder: Path) -> Path:
    """`folder`, made if missing, as a directory of ours that only we may use (0700, a
    looser mode of ours is tightened); a UserError when it is a link or someone else's."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    found = os.lstat(folder)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
        what = "not a directory" if not stat.S_ISDIR(found.st_mode) else "owned by another user"
        raise UserError(
            f"the agent cache {folder} is {what}: the node agent built there would run with "
            "every key a node gets",
            fix=f"remove {folder}, or point XDG_CACHE_HOME at a directory of your own",
        )
    if stat.S_IMODE(found.st_mode) & 0o077:
        os.chmod(folder, 0o700)
    return folder


def holds_build(path: Path, members: list[tuple[str, bytes]]) -> bool:
    """Whether `path` is a regular file of ours, writable by no one else, holding this build
    (read through one descriptor that follows no link)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:  # missing, or a symlink (ELOOP)
        return False
    with os.fdopen(fd, "rb") as handle:
        found = os.fstat(handle.fileno())
        if (
            not stat.S_ISREG(found.st_mode)
            or found.st_uid != os.getuid()
            or found.st_mode & 0o022
        ):
            return False
        data = handle.read()
    return is_build(data, members)


def is_build(data: bytes, members: list[tuple[str, bytes]]) -> bool:
    """Whether `data` is a zip of exactly `members` as `zip_bytes` lays them out: the same
    names in the same order, each inflating to its bytes, end to end with no gap, extra field
    or comment, so no byte of the file is anything but the build."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
            if [info.filename for info in infos] != [name for name, _ in members]:
                return False
            end = 0
            for info, (_, body) in zip(infos, members, strict=True):
                if (
                    info.header_offset != end
                    or info.extra
                    or info.comment
                    or info.compress_type != zipfile.ZIP_DEFLATED
                    or archive.read(info) != body
                ):
                    return False
                end += 30 + len(info.filename.encode()) + info.compress_size
            central = sum(46 + len(info.filename.encode()) for info in infos)
            return (
                archive.start_dir == end and not archive.comment and len(data) == end + central + 22
            )
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError):
        return False


def _write_atomically(path: Path, data: bytes) -> None:
    """A whole file or none: another process starting at once sees the old state or this."""
    fd, tmp = tempfile.mkstemp(prefix=".agent-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
