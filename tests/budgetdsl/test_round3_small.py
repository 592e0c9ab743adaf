"""Issue 23's smaller defects: a long `diff --base` ref is cut on stderr, not echoed whole, and
`calibrate --out` into a missing folder is refused like `export -o`, not made."""

import pathlib
import shutil

import pytest

from budgetdsl.cli import main

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def repo(committed_repo):
    return committed_repo(lambda root: shutil.copytree(REPO / "plans", root / "plans"))


@pytest.mark.parametrize("ref", ["a" * 100_000, "-" + "a" * 100_000, "\x1b]0;x\x07" * 20_000],
                         ids=["letters", "dash", "osc"])
def test_a_100k_base_ref_is_cut_on_stderr(repo, capsys, ref):
    assert main(["diff", f"--base={ref}"]) == 2
    err = capsys.readouterr().err
    assert len(err) < 500, err[:300]
    assert f"… ({len(ref):,} characters)" in err
    assert "\x1b" not in err


def test_calibrate_out_into_a_missing_folder_is_refused_like_export(tmp_path, capsys):
    pytest.importorskip("torch")
    missing = tmp_path / "nonexistent"
    assert main(["export", str(REPO / "plans/minimal.yaml"), "--to", "slurm", "--quiet",
                 "-o", str(missing / "job.sbatch")]) == 2
    assert main(["calibrate", "--quick", "--quiet", "--device", "cpu", "--out", str(missing / "x.json")]) == 2
    err = capsys.readouterr().err
    assert f"budgetdsl calibrate: error: --out {missing / 'x.json'}: no such folder {missing}" in err
    assert not missing.exists()
