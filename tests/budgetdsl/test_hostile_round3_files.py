"""Hostile inputs, round 3: the files the tool reads and writes (issue 23, defects 1, 4, 5, 6, 8).

Each test is the minimal reproducer, with the old behaviour in its docstring. No test here writes
to the machine's own /dev/null: a device is tried on a twin made in tmp_path (a character device
1:3, as root), so a regression replaces the twin, never the real one.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import socket
import stat
import subprocess
import sys
import threading

import pytest

from budgetdsl.cli import main
from budgetdsl.plan.diagnostics import PlanError
from budgetdsl.plan.loader import load_plan
from budgetdsl.plan.source import read_merged

REPO = pathlib.Path(__file__).resolve().parents[2]
MINIMAL = (REPO / "plans" / "minimal.yaml").read_text()
CALIBRATION = REPO / "tests" / "fixtures" / "calibration" / "sweep-gpt-micro-stdlib.json"


def _null_twin(tmp_path: pathlib.Path) -> pathlib.Path:
    """A character device with /dev/null's numbers, in tmp_path (needs root)."""
    path = tmp_path / "null"
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, AttributeError, OSError):
        pytest.skip("making a character device needs root")
    return path


def _plan(tmp_path: pathlib.Path) -> pathlib.Path:
    plan = tmp_path / "p.yaml"
    plan.write_text(MINIMAL)
    return plan


def _slurm_text(plan: pathlib.Path, capsys) -> str:
    assert main(["export", str(plan), "--to", "slurm", "-q"]) == 0
    return capsys.readouterr().out


# -- defect 1: -o onto a device, a FIFO, a socket -------------------------------------------------

def test_export_onto_a_fifo_writes_into_it_and_leaves_it_a_fifo(tmp_path, capsys):
    """`export -o FIFO` renamed a temporary file over the FIFO: its reader got 0 bytes, exit 0."""
    plan, fifo = _plan(tmp_path), tmp_path / "fifo"
    expected = _slurm_text(plan, capsys)
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader waits, so the writer's open returns
    try:
        assert main(["export", str(plan), "--to", "slurm", "-q", "-o", str(fifo)]) == 0
        received = b""
        while chunk := os.read(reader, 1 << 16):
            received += chunk
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert received.decode() == expected


def test_export_onto_a_character_device_writes_through_it(tmp_path, capsys):
    """As root, `export -o /dev/null` turned /dev/null into a regular 0666 file (tried on a twin)."""
    plan, null = _plan(tmp_path), _null_twin(tmp_path)
    assert main(["export", str(plan), "--to", "slurm", "-q", "-o", str(null)]) == 0
    after = os.stat(null)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == os.makedev(1, 3)
    assert set(os.listdir(tmp_path)) == {"p.yaml", "null"}


def test_calibration_written_onto_a_character_device_leaves_it_a_device(tmp_path):
    """`calibrate --out` goes through the same writer: a device stays a device."""
    from budgetdsl.plan.calibration_file import load_calibration, write_calibration

    null = _null_twin(tmp_path)
    write_calibration(null, load_calibration(CALIBRATION))
    assert stat.S_ISCHR(os.stat(null).st_mode)


def test_export_onto_a_socket_is_refused_and_the_socket_stays(tmp_path, capsys):
    """A socket was replaced by a regular file, exit 0."""
    plan, path = _plan(tmp_path), tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(path))
        assert main(["export", str(plan), "--to", "slurm", "-q", "-o", str(path)]) == 2
    finally:
        server.close()
    err = capsys.readouterr().err
    assert stat.S_ISSOCK(os.stat(path).st_mode)
    assert f"{path}: error[io]: a socket, not a file; nothing written" in err, err


def test_export_to_dev_stdout_works_when_stdout_is_a_pipe(tmp_path):
    """`-o /dev/stdout` with stdout a pipe: the temporary file was made in /proc/PID/fd/ (exit 2)."""
    plan = _plan(tmp_path)
    env = {**os.environ, "BUDGETDSL_TRACEBACK_DIR": str(tmp_path)}
    piped = subprocess.run([sys.executable, "-m", "budgetdsl", "export", str(plan), "--to", "slurm", "-q",
                            "-o", "/dev/stdout"], capture_output=True, env=env, timeout=120)
    direct = subprocess.run([sys.executable, "-m", "budgetdsl", "export", str(plan), "--to", "slurm", "-q"],
                            capture_output=True, env=env, timeout=120)
    assert piped.returncode == 0, piped.stderr[-300:]
    assert piped.stdout == direct.stdout and piped.stdout.startswith(b"#!")


def test_a_directory_named_as_output_is_refused(tmp_path):
    from budgetdsl.io.atomic_write import write_file

    with pytest.raises(IsADirectoryError):
        write_file(tmp_path, "x")


# -- defect 4: file names that are not UTF-8 in git ---------------------------------------------

def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def latin1_repo(tmp_path, monkeypatch):
    """A repository with a base, a plan that extends it, and a plan named b'\\xff.yaml'."""
    if shutil_which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path / "repo"
    (root / "plans").mkdir(parents=True)
    _git(root, "init", "-q")
    (root / "plans" / "base.yaml").write_text("fragment: true\n" + MINIMAL.split("noise:")[0])
    (root / "plans" / "child.yaml").write_text("extends: base.yaml\nname: child\nnoise:\n  b_crit: 1M\n")
    with open(os.path.join(os.fsencode(root / "plans"), b"\xff.yaml"), "w") as f:
        f.write("extends: base.yaml\nname: latin1\nnoise:\n  b_crit: 2M\n")
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "plans")
    monkeypatch.chdir(root)
    return root


def shutil_which(name: str) -> str | None:
    import shutil

    return shutil.which(name)


def test_check_dependents_reaches_a_plan_whose_name_is_not_utf8(latin1_repo, capsys):
    """UnicodeDecodeError in git_source.work_tree_files (exit 3)."""
    code = main(["check", "--dependents", "--format", "json", "plans/base.yaml"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    reached = {f["file"]: f.get("extends_changed") for f in json.loads(captured.out)["files"]}
    assert reached == {"plans/base.yaml": None, "plans/child.yaml": "plans/base.yaml",
                       "plans/\udcff.yaml": "plans/base.yaml"}, reached


def test_diff_base_with_a_name_that_is_not_utf8_at_the_base(latin1_repo, capsys):
    """UnicodeDecodeError in git_source.files_at when the base commit holds such a name (exit 3)."""
    with open(os.path.join(os.fsencode(latin1_repo / "plans"), b"\xff.yaml"), "w") as f:
        f.write("extends: base.yaml\nname: latin1\nnoise:\n  b_crit: 4M\n")
    code = main(["diff", "--base", "HEAD", "plans"])
    out = capsys.readouterr().out
    assert code in (0, 1), out
    assert "\\udcff.yaml" in out, out


# -- defect 5: aliases that multiply the document -------------------------------------------------

def test_aliases_that_expand_past_the_bound_are_a_located_error(tmp_path):
    """A 0.4 MB plan whose launch.env aliased one 400 KB string 199 times exported 80 MB."""
    big = "x" * 100_000
    env = "\n".join(f"    V{i}: *big" for i in range(40))
    plan = tmp_path / "alias.yaml"
    plan.write_text(MINIMAL + f"launch:\n  command: [train.py, &big {big}]\n  env:\n{env}\n")
    with pytest.raises(PlanError) as info:
        load_plan(str(plan))
    d = info.value.diagnostics[0]
    lines = plan.read_text().splitlines()
    assert d.code == "too-large" and d.message == ("the alias at launch.env.V9 expands the document past "
                                                   "1,048,576 characters, the size bound of a plan file")
    assert (d.location.file, lines[d.location.line - 1][d.location.col - 1:]) == (str(plan), "V9: *big")
    assert d.hint and "alias" in d.hint


def test_a_few_aliases_of_a_short_value_still_load(tmp_path):
    plan = tmp_path / "alias.yaml"
    plan.write_text(MINIMAL + "launch:\n  command: [train.py, &cfg configs/a.yaml]\n"
                    + "  env:\n" + "".join(f"    V{i}: *cfg\n" for i in range(200)))
    assert load_plan(str(plan)).name == "minimal-1b"


# -- defect 6: every file read through one guarded reader -----------------------------------------

def _within(fn, seconds: float = 60):
    """Run fn in a thread; its result, or the test fails when it has not returned (a hang)."""
    box: dict = {}
    t = threading.Thread(target=lambda: box.update(result=fn()), daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "blocked"
    return box["result"]


def test_a_keymap_that_is_a_fifo_is_a_problem_not_a_hang(tmp_path):
    """A FIFO as ~/.config/budgetdsl/keymap.yaml blocked the TUI's launch forever."""
    pytest.importorskip("textual")
    from budgetdsl.tui.keymap import load_keymap

    fifo = tmp_path / "keymap.yaml"
    os.mkfifo(fifo)
    try:
        keymap, problems = _within(lambda: load_keymap(fifo))
    finally:
        _release(fifo)
    assert keymap == {} and problems == [f"{fifo}: not a regular file (a FIFO, a device or a socket)"]


def _release(fifo) -> None:
    """A reader still blocked on the FIFO (the old code) gets end of file: a writer comes and goes."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:  # no reader waits
        pass


def test_a_keymap_that_is_a_device_is_not_read(tmp_path):
    """A symbolic link to /dev/zero as the keymap reached 11.8 GB RSS (tried on a /dev/null twin)."""
    pytest.importorskip("textual")
    from budgetdsl.tui.keymap import load_keymap

    link = tmp_path / "keymap.yaml"
    link.symlink_to(_null_twin(tmp_path))
    assert load_keymap(link) == ({}, [f"{link}: not a regular file (a FIFO, a device or a socket)"])


def test_a_keymap_larger_than_the_bound_is_not_read(tmp_path):
    pytest.importorskip("textual")
    from budgetdsl.tui.keymap import MAX_KEYMAP_BYTES, load_keymap

    path = tmp_path / "keymap.yaml"
    path.write_text("# " + "x" * MAX_KEYMAP_BYTES + "\n")
    assert load_keymap(path) == ({}, [f"{path}: larger than {MAX_KEYMAP_BYTES >> 10} KiB, not a keymap"])


def test_a_calibration_that_is_a_device_or_a_fifo_is_refused_without_blocking(tmp_path):
    """A FIFO named as a calibration blocked (stat said 0 bytes, then the read waited for a writer)."""
    from budgetdsl.plan.calibration_file import CalibrationFileError, load_calibration

    fifo = tmp_path / "cal.json"
    os.mkfifo(fifo)
    for path in (fifo, _null_twin(tmp_path)):
        try:
            exc = _within(lambda p=path: _raised(load_calibration, p))
        finally:
            _release(fifo)
        assert isinstance(exc, CalibrationFileError) and "not a regular file" in str(exc), exc


def _raised(fn, *args) -> BaseException | None:
    """The exception fn raised (carried out of the thread it ran in), or None."""
    try:
        fn(*args)
    except Exception as exc:
        return exc
    return None


READS = re.compile(r"\.read_(text|bytes)\(|(?<![.\w])open\(|\.open\(\s*[\"']r")


def test_every_file_read_goes_through_the_guarded_reader():
    """No module reads a path with read_text/read_bytes/open() but the guarded reader, except the
    files listed here, which no user names."""
    own_files = {
        "budgetdsl/io/guarded_read.py": "the reader itself",
        "budgetdsl/theory/closed_forms.py": "the package's own generated module",
        "calibrate/hardware.py": "/proc/cpuinfo",
        "budgetdsl/plan/edit.py": "writes copies of a plan's files into a temporary folder",
    }
    found = []
    for folder in ("budgetdsl", "tui", "calibrate"):
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            for n, line in enumerate(path.read_text().splitlines(), 1):
                code = line.split("#")[0]
                if READS.search(code) and rel not in own_files:
                    found.append(f"{rel}:{n}: {line.strip()}")
    assert not found, found


# -- defect 8: extends confinement checked on what was opened ------------------------------------

def test_a_symlink_swapped_during_extends_never_reads_the_outside_base(tmp_path):
    """The link target was checked, then the path opened again: swapping the link between the two
    let 49 of 150 runs read the refused outside base."""
    root, outside = tmp_path / "repo", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / ".git").mkdir()
    (root / "inside.yaml").write_text("fragment: true\nname: inside-base\n")
    (outside / "secret.yaml").write_text("fragment: true\nname: OUTSIDE-SECRET\n")
    (root / "plan.yaml").write_text("extends: base.yaml\nmodel: {params: 1B}\n")
    link = root / "base.yaml"
    link.symlink_to("inside.yaml")
    stop = threading.Event()

    def swap() -> None:
        targets = [str(outside / "secret.yaml"), "inside.yaml"]
        i = 0
        while not stop.is_set():
            tmp = root / ".swap"
            os.symlink(targets[i % 2], tmp)
            os.replace(tmp, link)
            i += 1

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    read, refused = 0, 0
    try:
        for _ in range(400):
            try:
                merged = read_merged(root / "plan.yaml")
            except PlanError as exc:
                assert exc.diagnostics[0].code in ("extends-outside", "extends"), exc.diagnostics[0].format()
                refused += 1
                continue
            assert merged.data["name"] == "inside-base", "the outside base was read"
            read += 1
    finally:
        stop.set()
        swapper.join()
    assert read + refused == 400


def test_a_calibration_read_inside_a_repository_is_checked_where_it_was_opened(tmp_path):
    """load_calibration(inside=ROOT) refuses a file that a link leads out to (the check for callers
    that confine a plan's calibration to its repository, made on the open descriptor)."""
    from budgetdsl.plan.calibration_file import CalibrationFileError, load_calibration

    root = tmp_path / "repo"
    root.mkdir()
    (root / "cal.json").symlink_to(CALIBRATION)
    with pytest.raises(CalibrationFileError, match="a symbolic link out of the repository"):
        load_calibration(root / "cal.json", inside=root)
    assert load_calibration(root / "cal.json").schema_version == load_calibration(CALIBRATION).schema_version
