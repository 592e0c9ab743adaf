"""Offline corpora: deterministic, split, hashed; the batch sampler."""

import hashlib
import sysconfig
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from budgetdsl.calibrate.data import (  # noqa: E402
    CorpusError,
    TokenSampler,
    load_corpus,
    stdlib_corpus,
    text_corpus,
    token_corpus,
)


def test_stdlib_corpus_is_deterministic_bounded_and_not_site_packages():
    a, b = stdlib_corpus(300_000), stdlib_corpus(300_000)
    assert a.sha256 == b.sha256 and np.array_equal(a.train, b.train)
    assert a.train.size + a.heldout.size <= 300_000
    assert 0.04 < a.heldout.size / (a.train.size + a.heldout.size) < 0.25  # every 10th file
    assert a.vocab_size == 256 and a.kind == "stdlib" and a.n_files > 10
    assert a.sha256 == hashlib.sha256(a.train.tobytes() + a.heldout.tobytes()).hexdigest()
    assert "site-packages" not in a.source
    # sorted by relative path, the corpus starts with the first file: __future__.py
    first = (Path(sysconfig.get_paths()["stdlib"]) / "__future__.py").read_bytes()
    assert a.train[: len(first)].tobytes() == first


def test_stdlib_corpus_records_no_machine_path():
    """The calibration file names the stdlib corpus by Python version (portable), not by the
    interpreter's install prefix; the committed fixtures do the same."""
    import platform

    root = sysconfig.get_paths()["stdlib"]
    assert stdlib_corpus(50_000).describe()["source"] == f"python-stdlib:{platform.python_version()}"
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "calibration"
    for f in sorted(fixtures.glob("*.json")):
        text = f.read_text()
        assert root not in text and "python-stdlib:/" not in text, f.name


def test_text_file_holds_out_its_last_tenth(tmp_path):
    f = tmp_path / "t.txt"
    f.write_bytes(bytes(range(256)) * 40)
    c = text_corpus(f)
    assert c.train.size == 9216 and c.heldout.size == 1024
    assert c.heldout.tobytes() == f.read_bytes()[9216:]


def test_text_folder_splits_by_file_and_skips_binary_and_hidden(tmp_path):
    for i in range(20):
        (tmp_path / f"{i:02d}.md").write_text(f"file {i} " * 30)
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "x.txt").write_text("secret " * 100)
    (tmp_path / "img.png").write_bytes(b"\x89PNG\0\0\0" * 10)
    c = load_corpus(str(tmp_path))
    assert c.kind == "text" and c.n_files == 20
    held = c.heldout.tobytes()
    assert b"file 9 " in held and b"file 19 " in held and b"file 0 " not in held
    assert b"secret" not in c.train.tobytes() + held and b"PNG" not in c.train.tobytes()


def test_nanogpt_token_files(tmp_path):
    np.array([1, 2, 3, 700] * 100, dtype=np.uint16).tofile(tmp_path / "train.bin")
    np.array([5, 6] * 100, dtype=np.uint16).tofile(tmp_path / "val.bin")
    c = load_corpus(str(tmp_path))
    assert c.kind == "tokens" and c.vocab_size == 704  # 701 padded up to a multiple of 64
    assert c.train.dtype == np.uint16 and c.train.size == 400 and c.heldout.size == 200
    assert token_corpus(tmp_path, vocab_size=50304).vocab_size == 50304
    with pytest.raises(CorpusError, match="token 700 does not fit vocab_size 512"):
        token_corpus(tmp_path, vocab_size=512)
    single = load_corpus(str(tmp_path / "train.bin"))  # one file: last 10% held out
    assert single.train.size == 360 and single.heldout.size == 40


def test_sampler_draws_windows_deterministically():
    tokens = np.arange(1000, dtype=np.uint16)
    s = TokenSampler(tokens, block_size=16)
    a = s(8, torch.Generator().manual_seed(1))
    b = s(8, torch.Generator().manual_seed(1))
    assert a.shape == (8, 17) and a.dtype == torch.int64 and torch.equal(a, b)
    assert torch.all(a[:, 1:] - a[:, :-1] == 1)  # consecutive tokens
    with pytest.raises(CorpusError, match="too few"):
        TokenSampler(tokens[:10], block_size=16)
