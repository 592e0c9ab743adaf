"""One rule for every output path (issue 23): its folder must exist, and none is made. `plan --plot`
made missing folders while `export -o` and `calibrate --out` refused them; a misspelt path now
fails the same way everywhere, before anything is written, and says what to run."""

import pathlib

import pytest

from budgetdsl.cli import main

PLANS = pathlib.Path(__file__).resolve().parents[2] / "plans"


def _refused(capsys, argv: list[str], missing: pathlib.Path) -> str:
    assert main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err
    assert not missing.exists()  # no folder made, nothing written
    assert f"no such folder {missing}" in err and "mkdir -p" in err, err
    return err


def test_plan_plot_refuses_a_missing_folder_as_export_o_does(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    missing = tmp_path / "no" / "such"
    err = _refused(capsys, ["plan", PLANS / "minimal.yaml", "--plot", missing / "{name}.svg"], missing)
    assert "error[io]" in err and "Traceback" not in err
    _refused(capsys, ["export", PLANS / "minimal.yaml", "--to", "slurm", "-o", missing / "job.sbatch"], missing)
    assert not (tmp_path / "no").exists()


def test_the_documented_plot_path_works_where_its_folder_exists(tmp_path, capsys, monkeypatch):
    """README and docs/cli.md: `--plot 'docs/{name}.svg'` from a repository that has docs/."""
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    assert main(["plan", str(PLANS / "minimal.yaml"), str(PLANS / "llama2-7b.yaml"), "--plot", "docs/{name}.svg",
                 "--format", "markdown"]) == 0
    drawn = sorted(p.name for p in (tmp_path / "docs").iterdir())
    assert len(drawn) == 2 and all(n.endswith(".svg") for n in drawn)
    assert all(f"docs/{n}" in capsys.readouterr().out for n in drawn[:1])


def test_the_api_writer_refuses_a_missing_folder_for_every_caller(tmp_path):
    """The check is in the one writer (io.atomic_write), so every output takes it."""
    from budgetdsl.io.atomic_write import MissingFolder, write_files

    kept = tmp_path / "kept.txt"
    with pytest.raises(MissingFolder, match="no such folder"):
        write_files({kept: "a", tmp_path / "gone" / "b.txt": "b"})
    assert not kept.exists() and not (tmp_path / "gone").exists()  # all or nothing
