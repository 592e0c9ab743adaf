"""`calibrate --resume` with a checkpoint it cannot use: an input problem (exit 2) that names the
file and says it can be deleted, not a torch traceback."""

import re

import pytest

torch = pytest.importorskip("torch")

from budgetdsl.calibrate.config import QUICK, RunConfig  # noqa: E402
from budgetdsl.calibrate.run import checkpoint_path  # noqa: E402


def _checkpoint(out) -> bytes:
    """A checkpoint as calibrate writes it (config, weights), as bytes."""
    path = checkpoint_path(out)
    torch.save({"config": RunConfig(**QUICK).to_dict(), "model": {"w": torch.zeros(4096)}}, path)
    return path.read_bytes()


@pytest.mark.parametrize("damage", [
    lambda data: data[: len(data) // 2],  # cut short (torch says RuntimeError or EINVAL)
    lambda data: data[:-200],  # its zip directory cut off
    lambda data: b"",  # the disk filled up (pickle: EOFError)
    lambda data: b"PK\x03\x04" + bytes(100),  # garbage
], ids=["half", "end", "empty", "garbage"])
def test_a_damaged_checkpoint_is_an_input_error_naming_the_file(cli, tmp_path, capsys, damage):
    out = tmp_path / "r.json"
    ckpt = checkpoint_path(out)
    ckpt.write_bytes(damage(_checkpoint(out)))
    assert cli(["calibrate", "--quick", "--resume", "--quiet", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"budgetdsl calibrate: error: --resume: cannot read the checkpoint {ckpt} (")
    assert re.search(r" \(\w[^)]*\); it is damaged or not a budgetdsl checkpoint: delete it and run "
                     r"again without --resume\n$", err), err
    assert len(err.splitlines()) == 1 and not out.exists()


def test_a_torch_file_that_is_not_a_checkpoint(cli, tmp_path, capsys):
    out = tmp_path / "r.json"
    torch.save([1, 2, 3], checkpoint_path(out))
    assert cli(["calibrate", "--quick", "--resume", "--quiet", "--out", str(out)]) == 2
    assert f"{checkpoint_path(out)} is not a budgetdsl calibration checkpoint; delete it" in capsys.readouterr().err
