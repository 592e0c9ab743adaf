"""Remapping the TUI's keys: every binding has an id, and a keymap maps ids to other keys.

Through Textual's own keymap (`App.set_keymap`); the ids are listed in `docs/tui.md`. A keymap comes
from `make_app(..., keymap=...)` or `$XDG_CONFIG_HOME/budgetdsl/keymap.yaml`, a YAML mapping such as
`quit: ctrl+x` or `plot.x-axis: f6,x` (several keys comma-separated). An id that no binding has, or a
value that is not a key string, is reported and ignored.
"""

from __future__ import annotations

import os
from pathlib import Path

MAX_KEYMAP_BYTES = 64 << 10  # a keymap is a few lines; the bindings fit in a kilobyte


def keymap_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "budgetdsl" / "keymap.yaml"


def load_keymap(path: Path | None = None) -> tuple[dict[str, str], list[str]]:
    """(keymap, problems) from the keymap file; an absent file is an empty keymap."""
    import yaml

    from budgetdsl.io.guarded_read import NotRegularFile, read_regular

    path = keymap_path() if path is None else path
    try:  # the one guarded reader: a FIFO does not block the launch, /dev/zero is not read
        raw = read_regular(path, MAX_KEYMAP_BYTES)
        if len(raw) > MAX_KEYMAP_BYTES:
            return {}, [f"{path}: larger than {MAX_KEYMAP_BYTES >> 10} KiB, not a keymap"]
        text = raw.decode("utf-8")
    except FileNotFoundError:
        return {}, []
    except NotRegularFile:
        return {}, [f"{path}: not a regular file (a FIFO, a device or a socket)"]
    except OSError as exc:
        return {}, [f"{path}: {exc.strerror or exc}"]
    except UnicodeDecodeError as exc:
        return {}, [f"{path}: not UTF-8 text (byte {exc.start + 1}); save it as UTF-8"]
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return {}, [f"{path}: not YAML: {exc}"]
    if data is None:
        return {}, []
    if not isinstance(data, dict):
        return {}, [f"{path}: expected a mapping of binding ids to keys, e.g. 'quit: ctrl+x'"]
    return check_keymap(data, str(path))


def check_keymap(data: dict, where: str = "keymap") -> tuple[dict[str, str], list[str]]:
    """The entries of `data` that name a known binding id with a key string; the others as problems."""
    from budgetdsl.tui.app import binding_ids

    known = binding_ids()
    keymap, problems = {}, []
    for key, value in data.items():
        if key not in known:
            problems.append(f"{where}: no binding has the id {key!r} (ids: {', '.join(sorted(known))})")
        elif not isinstance(value, str) or not value.strip():
            problems.append(f"{where}: {key}: expected keys such as 'ctrl+x' or 'f6,x', got {value!r}")
        else:
            keymap[key] = value.strip()
    return keymap, problems
