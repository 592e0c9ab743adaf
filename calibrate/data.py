"""Token corpora the proxy trains on, and the sampler that draws batches from them.

All offline: `stdlib` (the Python standard library's own source, on every machine, so the default
calibration needs no download), a text file or folder (bytes, vocabulary 256), or nanoGPT token
files (`train.bin`, `val.bin`: uint16, memory-mapped). Each has a deterministic train/held-out split
and a SHA-256 of the tokens used, so a calibration file names its data unambiguously.
"""

from __future__ import annotations

import hashlib
import platform
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

HELDOUT_EVERY = 10  # folder corpora: every 10th file (sorted order) is held out, ~10%
HELDOUT_FRACTION = 0.1  # single-stream corpora: the last 10% is held out (as nanoGPT's prepare.py)
_SKIP_DIRS = {"site-packages", "dist-packages", "__pycache__"}


@dataclass(frozen=True)
class Corpus:
    """Train and held-out token streams plus what a calibration file records about them."""

    train: np.ndarray  # 1-D uint8 or uint16 (possibly a memmap)
    heldout: np.ndarray
    vocab_size: int
    kind: str  # "stdlib" | "text" | "tokens"
    source: str
    sha256: str  # of train then held-out tokens, as stored (bytes, or uint16 little-endian)
    n_files: int

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "source": self.source,
            "sha256": self.sha256,
            "vocab_size": self.vocab_size,
            "train_tokens": int(self.train.size),
            "heldout_tokens": int(self.heldout.size),
            "files": self.n_files,
            "token_stats": token_stats(self.train),
        }


# Token statistics read from at most this many training tokens (a token file may hold billions).
STATS_TOKENS = 1 << 24


def token_stats(tokens: np.ndarray) -> dict:
    """What the tokens are, from the tokens themselves (the transfer guard reads it, not the corpus
    label): how many were counted, distinct ids, the largest id (below 256: bytes, whatever the
    files were called) and the unigram entropy in nats."""
    head = np.asarray(tokens[:STATS_TOKENS])
    counts = np.bincount(head.astype(np.int64)) if head.size else np.zeros(1, dtype=np.int64)
    p = counts[counts > 0] / max(head.size, 1)
    return {"tokens": int(head.size), "distinct": int(p.size), "max_token": int(head.max()) if head.size else 0,
            "unigram_entropy": float(-(p * np.log(p)).sum())}


class CorpusError(ValueError):
    """The data cannot be used (missing, empty, too short for the sequence length)."""


def _sha256(*arrays: np.ndarray) -> str:
    h = hashlib.sha256()
    for a in arrays:
        for start in range(0, a.size, 1 << 24):  # chunked: a memmap is never read whole at once
            chunk = a[start : start + (1 << 24)]
            h.update(np.ascontiguousarray(chunk, dtype=a.dtype.newbyteorder("<")).tobytes())
    return h.hexdigest()


def _byte_corpus(files: list[Path], root: Path, kind: str, source: str, max_bytes: int | None) -> Corpus:
    """Read files as bytes in the given (sorted) order, up to max_bytes; every HELDOUT_EVERY-th
    file goes to the held-out stream, the rest to train."""
    train, heldout, used, total = [], [], 0, 0
    for i, f in enumerate(files):
        data = _read(f, None if max_bytes is None else max_bytes - total)
        if max_bytes is not None and total + len(data) > max_bytes and total > 0:
            break
        (heldout if i % HELDOUT_EVERY == HELDOUT_EVERY - 1 else train).append(data)
        total += len(data)
        used += 1
    if not train or not heldout:  # too few files to split by file: split the stream instead
        stream = np.frombuffer(b"".join(train + heldout), dtype=np.uint8)
        return _split_stream(stream, 256, kind, source, used)
    tr = np.frombuffer(b"".join(train), dtype=np.uint8)
    ho = np.frombuffer(b"".join(heldout), dtype=np.uint8)
    return Corpus(tr, ho, 256, kind, source, _sha256(tr, ho), used)


def _split_stream(tokens: np.ndarray, vocab: int, kind: str, source: str, n_files: int) -> Corpus:
    cut = int(tokens.size * (1 - HELDOUT_FRACTION))
    tr, ho = tokens[:cut], tokens[cut:]
    return Corpus(tr, ho, vocab, kind, source, _sha256(tr, ho), n_files)


def stdlib_corpus(max_bytes: int = 8_000_000) -> Corpus:
    """The standard library's `*.py` files (not site-packages), sorted by relative path."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(
        (f for f in root.rglob("*.py") if not _SKIP_DIRS.intersection(f.relative_to(root).parts)),
        key=lambda f: f.relative_to(root).as_posix(),
    )
    if not files:
        raise CorpusError(f"no Python source files found under {root}")
    # The root is machine-specific (/usr/lib/python3.11, a pyenv or venv prefix): the file records
    # the Python version instead, and the tokens' SHA-256 says exactly what was read.
    return _byte_corpus(files, root, "stdlib", f"python-stdlib:{platform.python_version()}", max_bytes)


def _read(path: Path, limit: int | None) -> bytes:
    """At most `limit` + 1 bytes of a regular file (all of it without a limit), through the
    tool's one guarded reader: a FIFO or a device among the data is an error, not a hang."""
    from budgetdsl.io.guarded_read import read_regular

    return read_regular(path, sys.maxsize if limit is None else max(limit, 0))


def _looks_binary(path: Path) -> bool:
    return b"\0" in _read(path, 8191)


def text_corpus(path: Path, max_bytes: int | None = None) -> Corpus:
    """A text file (last 10% held out) or a folder of them (every 10th file held out). Hidden
    entries and files that look binary (a NUL byte in the first 8 KiB) are skipped."""
    if path.is_file():
        data = _read(path, max_bytes)[:max_bytes]
        return _split_stream(np.frombuffer(data, dtype=np.uint8), 256, "text", str(path), 1)
    files = sorted(
        (
            f
            for f in path.rglob("*")
            if f.is_file()
            and not any(part.startswith(".") for part in f.relative_to(path).parts)
            and not _looks_binary(f)
        ),
        key=lambda f: f.relative_to(path).as_posix(),
    )
    if not files:
        raise CorpusError(f"no text files found under {path}")
    return _byte_corpus(files, path, "text", str(path), max_bytes)


def token_corpus(path: Path, vocab_size: int | None = None) -> Corpus:
    """nanoGPT token files: a folder with train.bin (and val.bin), or one .bin file whose last 10%
    is held out. Tokens are uint16; the vocabulary is `vocab_size` or the largest token + 1,
    padded up to a multiple of 64 (as nanoGPT pads GPT-2's 50257 to 50304)."""
    if path.is_dir():
        train_path, val_path = path / "train.bin", path / "val.bin"
        if not train_path.exists():
            raise CorpusError(f"{path} has no train.bin")
    else:
        train_path, val_path = path, None
    train = np.memmap(train_path, dtype=np.uint16, mode="r")
    if val_path is not None and val_path.exists():
        heldout = np.memmap(val_path, dtype=np.uint16, mode="r")
        n_files = 2
    else:
        cut = int(train.size * (1 - HELDOUT_FRACTION))
        train, heldout, n_files = train[:cut], train[cut:], 1
    if train.size == 0 or heldout.size == 0:
        raise CorpusError(f"{path}: empty token file")
    largest = int(max(train.max(), heldout.max()))
    if vocab_size is None:
        vocab_size = -(-(largest + 1) // 64) * 64
    elif largest >= vocab_size:
        raise CorpusError(f"{path}: token {largest} does not fit vocab_size {vocab_size}")
    return Corpus(train, heldout, vocab_size, "tokens", str(path), _sha256(train, heldout), n_files)


def load_corpus(spec: str, max_bytes: int | None = 8_000_000, vocab_size: int | None = None) -> Corpus:
    """`stdlib`, a path to .bin token file(s), or a path to text."""
    if spec == "stdlib":
        return stdlib_corpus(max_bytes if max_bytes is not None else 8_000_000)
    path = Path(spec)
    if not path.exists():
        raise CorpusError(f"data path {spec!r} does not exist")
    if path.suffix == ".bin" or (path.is_dir() and (path / "train.bin").exists()):
        return token_corpus(path, vocab_size)
    return text_corpus(path, max_bytes)


class TokenSampler:
    """Draws n windows of block_size + 1 consecutive tokens at uniform random offsets: one example
    is one sequence (inputs and shifted targets), as in nanoGPT's get_batch."""

    def __init__(self, tokens: np.ndarray, block_size: int):
        if tokens.size < block_size + 2:
            raise CorpusError(f"{tokens.size} tokens are too few for sequences of {block_size}")
        self.tokens = tokens
        self.block_size = block_size
        self.tokens_per_example = block_size  # predicted tokens per example

    def __call__(self, n: int, generator: torch.Generator) -> torch.Tensor:
        starts = torch.randint(self.tokens.size - self.block_size, (n,), generator=generator).numpy()
        idx = starts[:, None] + np.arange(self.block_size + 1)  # (n, T+1)
        return torch.from_numpy(self.tokens[idx].astype(np.int64))
