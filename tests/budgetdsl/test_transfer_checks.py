"""Issue 15 item 2: a calibration transferred to a plan's model is refused where the result means
nothing and warned about, located in the plan, where it is only doubtful.

The calibration files are the committed real output of `budgetdsl calibrate`
(tests/fixtures/calibration), edited only in the fields a check reads, the way a `--quick` run or
a run on another corpus writes them.
"""

import json
import pathlib
import subprocess
import sys

import pytest

from budgetdsl.plan.calibration_file import load_calibration
from budgetdsl.plan.diagnostics import PlanError
from budgetdsl.plan.loader import load_plan
from budgetdsl.report.text import render
from budgetdsl.solve.solver import solve
from budgetdsl.theory.context_scaling import context_factor

REPO = pathlib.Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests/fixtures/calibration/gpt-micro-stdlib.json"
BUDGETDSL = pathlib.Path(sys.executable).parent / "budgetdsl"


def _calibration(tmp_path, edit=None) -> pathlib.Path:
    data = json.loads(FIXTURE.read_text())
    if edit:
        edit(data)
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(data))
    return path


def _quick_run(data):
    """What `calibrate --quick` wrote in the issue: a training run whose fit failed, summary at 3.4
    with B_simple = 101 tokens (the fixture's interval scaled with it)."""
    data["fit"] = None
    data["fit_error"] = "0 usable trajectory points; the fit needs at least 3"
    s = data["summary"]
    s["loss"] = 3.4
    k = 101.0 / s["b_simple_tokens"]
    for key in ("b_simple", "b_simple_tokens", "ci_low", "ci_high", "ci_low_tokens", "ci_high_tokens"):
        s[key] *= k


def _fixed_weights(data):
    """`calibrate --lr 0`: the EMA is the plain mean (beta 1), no fit by design, one loss."""
    _quick_run(data)
    data["fit_error"] = "B_simple was averaged over the whole run (--lr 0 / --ema-beta 1): one loss, nothing to fit"
    data["provenance"]["estimator"]["ema_beta"] = 1.0


def _own_corpus(data, vocab=50257):
    data["provenance"]["data"].update(kind="tokens", source="train.bin", vocab_size=vocab)


def _plan(tmp_path, cal, at_loss, model="params: 13e9, layers: 40, d_model: 5120, heads: 40, seq_len: 4096",
          run="") -> pathlib.Path:
    plan = tmp_path / "p.yaml"
    plan.write_text(f"""name: transfer
model: {{{model}}}
hardware: {{gpu: A100-SXM4-80GB, gpus: 1024, zero: 3}}
target: {{min_tokens: 2T}}
noise:
  calibration: {cal}
  at_loss: {at_loss}
{run}""")
    return plan


def _errors(plan) -> dict[str, object]:
    with pytest.raises(PlanError) as exc:
        solve(load_plan(plan))
    return {d.code: d for d in exc.value.diagnostics}


def test_the_issue_case_a_quick_calibration_for_a_13b_plan_is_refused_located(tmp_path):
    plan = _plan(tmp_path, _calibration(tmp_path, _quick_run), 3.4)
    errors = _errors(plan)
    assert set(errors) == {"calibration-no-fit", "b-crit-below-sequence"}
    no_fit, short = errors["calibration-no-fit"], errors["b-crit-below-sequence"]
    assert no_fit.location.file.endswith("p.yaml") and no_fit.location.line == 6  # noise.calibration
    assert "0 usable trajectory points" in no_fit.message and "--steps" in no_fit.hint
    assert short.location.line == 6  # the noise section
    b_simple = load_calibration(plan.parent / "cal.json").summary.b_simple_tokens
    scaled = b_simple * context_factor(4096, 64)  # read for 4096-token sequences from its 64
    assert f"is {scaled:.3g} tokens ({b_simple:.3g} measured at its 64-token context)" in short.message
    assert "4096 tokens" in short.message


def test_the_command_exits_2_with_the_located_errors_on_stderr(tmp_path):
    plan = _plan(tmp_path, _calibration(tmp_path, _quick_run), 3.4)
    out = subprocess.run([str(BUDGETDSL), "plan", str(plan)], capture_output=True, text=True)
    assert out.returncode == 2, out.stderr
    assert f"{plan}:6:" in out.stderr and "error[calibration-no-fit]" in out.stderr
    assert "error[b-crit-below-sequence]" in out.stderr and "feasible" not in out.stdout


def test_a_fixed_weights_calibration_without_a_fit_is_still_read_at_its_loss(tmp_path):
    """--lr 0 has no fit by design; its one bounded estimate stays usable (on a proxy-sized model)."""
    cal = _calibration(tmp_path, _fixed_weights)
    plan = _plan(tmp_path, cal, 3.4, model="params: 25M, layers: 6, d_model: 512, heads: 8, seq_len: 64")
    sol = solve(load_plan(plan))
    assert sol.frontier.b_crit_tokens == pytest.approx(load_calibration(cal).summary.b_simple_tokens)
    assert "calibration-no-fit" not in {w.code for w in sol.warnings}


def test_b_crit_below_one_sequence_is_refused_even_with_a_fit(tmp_path):
    cal = _calibration(tmp_path, _own_corpus)
    fit = load_calibration(cal).fit
    loss = (fit.loss_min + fit.loss_max) / 2
    b_crit, _ = load_calibration(cal).b_crit_tokens_at(loss)
    # B_crit read for seq_len s is b_crit·(s/64)^γ (its 64-token context): the first power of two
    # whose sequence is longer than that
    seq = next(2**k for k in range(6, 40) if b_crit * context_factor(2**k, 64) < 2**k)
    plan = _plan(tmp_path, cal, loss, model=f"params: 1e9, layers: 16, d_model: 2048, heads: 16, seq_len: {seq}")
    assert set(_errors(plan)) == {"b-crit-below-sequence"}
    # One sequence shorter than B_crit: the same calibration is accepted.
    half = _plan(tmp_path, cal, loss, model=f"params: 1e9, layers: 16, d_model: 2048, heads: 16, seq_len: {seq // 2}")
    assert solve(load_plan(half)).frontier.b_crit_tokens == pytest.approx(b_crit * context_factor(seq // 2, 64))


def _proxy_plan(tmp_path, edit, vocab=None, run="", seq_len=64):
    cal = _calibration(tmp_path, edit)
    fit = load_calibration(cal).fit
    extra = f", vocab: {vocab}" if vocab else ""
    return _plan(tmp_path, cal, round((fit.loss_min + fit.loss_max) / 2, 3),
                 # 45M: 6 layers of 12·d² (18.9M) and GPT-2's 50,257 × 512 embedding (25.7M), which
                 # N counts (a plan whose embedding alone exceeds params is refused, plan-rule)
                 model=f"params: 45M, layers: 6, d_model: 512, heads: 8, seq_len: {seq_len}{extra}", run=run)


def test_a_plan_of_the_proxy_itself_is_not_warned_about_its_corpus(tmp_path):
    """The fixture's own 64-token sequences and byte vocabulary: the plan trains on the proxy's
    stream (as plans/ramp-gpt-micro-proxy.yaml does); nothing is transferred."""
    assert solve(load_plan(_proxy_plan(tmp_path, None))).warnings == []
    assert solve(load_plan(_proxy_plan(tmp_path, None, vocab=256))).warnings == []


def test_the_built_in_proxy_corpus_is_a_located_warning_not_an_error(tmp_path):
    plan = _proxy_plan(tmp_path, None, seq_len=32)  # another sequence length: another model's data
    sol = solve(load_plan(plan))
    assert sol.feasible
    (w,) = [w for w in sol.warnings if w.code == "calibration-corpus"]
    assert (w.file, w.line) == (str(plan), 6) and "stdlib" in w.message
    assert "Warnings" in render(sol, "text") and "calibration-corpus" in render(sol, "markdown")
    out = subprocess.run([str(BUDGETDSL), "plan", "--format", "json", str(plan)], capture_output=True, text=True)
    assert out.returncode == 0
    # (and its 64-token context read for 32-token sequences: tests/budgetdsl/test_calibration_context.py)
    assert [w["code"] for w in json.loads(out.stdout)["warnings"]] == ["calibration-context", "calibration-corpus"]
    assert out.stderr.startswith(f"{plan}:6:") and "warning[calibration-corpus]" in out.stderr


def test_a_different_vocabulary_is_a_warning_and_the_same_one_is_not(tmp_path):
    other = solve(load_plan(_proxy_plan(tmp_path, lambda d: _own_corpus(d, 256), vocab=50257)))
    assert [w.code for w in other.warnings] == ["calibration-tokenizer"]
    assert "256" in other.warnings[0].message and other.warnings[0].line == 7  # noise.at_loss
    same = solve(load_plan(_proxy_plan(tmp_path, lambda d: _own_corpus(d, 256), vocab=256)))
    assert same.warnings == []  # the negative control: the target's own corpus and tokenizer


@pytest.mark.parametrize("x, warned", [(0.005, True), (0.02, False), (1.0, False), (50.0, False), (200.0, True)])
def test_a_batch_far_from_b_crit_is_a_warning_at_the_pinned_batch(tmp_path, x, warned):
    b_crit = 4 * 2 ** 20  # tokens, declared: the check is about x, whatever B_crit's source
    sequences = 8 * max(1, round(x * b_crit / 4096 / 8))  # whole sequences on each of 8 replicas
    plan = tmp_path / "x.yaml"
    plan.write_text(f"""name: x
model: {{params: 7e9, layers: 32, d_model: 4096, heads: 32, seq_len: 4096}}
hardware: {{gpu: H100-SXM5-80GB, gpus: 8}}
target: {{tokens: 1T, at_batch: 4Mi}}
noise: {{b_crit: {b_crit}}}
run:
  batch: {sequences} * 4096
""")
    sol = solve(load_plan(plan))
    codes = [w for w in sol.warnings if w.code == "batch-far-from-b-crit"]
    assert sol.frontier.x == pytest.approx(sequences * 4096 / b_crit)
    assert bool(codes) is warned
    if warned:
        assert codes[0].line == 7 and f"{sol.frontier.x:.3g}" in codes[0].message


def test_a_fit_whose_slope_is_not_told_from_zero_is_refused_located(tmp_path):
    """Issue 25: a noise-only fit (alpha 0.89 +- 0.62 at lr 0) was read at other losses; a file
    that records its slope as within its errors of 0 is refused at noise.calibration."""
    def flat(data):
        data["fit"]["slope_z"] = 1.4

    errors = _errors(_proxy_plan(tmp_path, flat))
    assert set(errors) == {"calibration-flat-fit"}
    e = errors["calibration-flat-fit"]
    assert e.location.line == 6 and "1.4 standard errors" in e.message and "--steps" in e.hint

    def steep(data):
        data["fit"]["slope_z"] = 5.0

    assert solve(load_plan(_proxy_plan(tmp_path, steep))).frontier.b_crit_tokens > 0


def _stats(max_token, distinct=None):
    return {"tokens": 1_000_000, "distinct": distinct or min(max_token + 1, 97), "max_token": max_token,
            "unigram_entropy": 3.1}


def _stdlib_as_a_folder(data):
    """Issue 25: the stdlib corpus passed as a folder: kind "text", not "stdlib"; its recorded tokens
    are bytes."""
    data["provenance"]["data"].update(kind="text", source="/usr/lib/python3.11", token_stats=_stats(255))


def test_the_corpus_is_judged_from_its_tokens_not_its_label(tmp_path):
    """The folder case warned nothing before (the check keyed on kind == "stdlib"); the token
    statistics show bytes whatever the label says, and show BPE ids whatever the label says."""
    fit = load_calibration(_calibration(tmp_path)).fit
    at = round((fit.loss_min + fit.loss_max) / 2, 3)
    plan = _plan(tmp_path, _calibration(tmp_path, _stdlib_as_a_folder), at,
                 model="params: 1e9, layers: 16, d_model: 2048, heads: 16, seq_len: 128")
    (w,) = [w for w in solve(load_plan(plan)).warnings if w.code == "calibration-corpus"]
    assert w.line == 6 and "byte-level" in w.message and "ids up to 255" in w.message
    # A label that says token file, tokens that are bytes: still warned.
    def relabelled(data):
        data["provenance"]["data"].update(kind="tokens", source="train.bin", token_stats=_stats(200))
    plan = _plan(tmp_path, _calibration(tmp_path, relabelled), at,
                 model="params: 1e9, layers: 16, d_model: 2048, heads: 16, seq_len: 128")
    assert "calibration-corpus" in {w.code for w in solve(load_plan(plan)).warnings}
    # The stdlib label on BPE tokens (ids past 256) and the target's vocabulary: nothing doubtful.
    def bpe(data):
        data["provenance"]["data"].update(vocab_size=50257, token_stats=_stats(50256, 40_000))
    plan = _plan(tmp_path, _calibration(tmp_path, bpe), at,
                 model="params: 1e9, layers: 16, d_model: 2048, heads: 16, seq_len: 64, vocab: 50257")
    assert solve(load_plan(plan)).warnings == []


def test_the_calibrate_reader_records_the_token_statistics(tmp_path):
    """What the guard reads is written by `budgetdsl calibrate`'s corpus reader from the tokens."""
    np = pytest.importorskip("numpy")
    from budgetdsl.calibrate.data import token_stats

    stats = token_stats(np.frombuffer(b"abcabcabd", dtype=np.uint8))
    assert stats["max_token"] == ord("d") and stats["distinct"] == 4 and stats["tokens"] == 9
    p = np.array([3, 3, 2, 1]) / 9  # a, b, c, d
    assert stats["unigram_entropy"] == pytest.approx(float(-(p * np.log(p)).sum()))


def _at_batch_plan(tmp_path, x):
    cal = _calibration(tmp_path, _own_corpus)
    c = load_calibration(cal)
    at = round((c.fit.loss_min + c.fit.loss_max) / 2, 3)
    b_crit, _ = c.b_crit_tokens_at(at)
    return _plan(tmp_path, cal, at, model="params: 1e9, layers: 16, d_model: 2048, heads: 16, seq_len: 64",
                 run=f"target: {{tokens: 260e9, at_batch: {x * b_crit:.6g}}}\n").read_text(), b_crit


@pytest.mark.parametrize("x, warned", [(381, True), (1.0, False), (0.005, True)])
def test_target_at_batch_far_from_b_crit_is_a_located_warning(tmp_path, x, warned):
    """Issue 25: at_batch = 381 B_crit turned a declared 260B tokens into E_min = 260B/382, silently."""
    text, b_crit = _at_batch_plan(tmp_path, x)
    plan = tmp_path / "p.yaml"
    plan.write_text(text.replace("target: {min_tokens: 2T}\n", ""))
    sol = solve(load_plan(plan))
    got = [w for w in sol.warnings if w.code == "at-batch-far-from-b-crit"]
    assert bool(got) == warned
    if warned:
        (w,) = got
        line = plan.read_text().splitlines()[w.line - 1]
        assert w.col == line.index("at_batch: ") + len("at_batch: ") + 1  # at its value
        assert f"x = {x:.3g}" in w.message and "E_min = tokens/(1 + x)" in w.message


def test_extrapolation_reaches_one_measured_range_and_no_further(tmp_path):
    """extrapolate: true used to read the law at any loss; now at most one measured range's width
    past the range (a located error beyond it, at noise.at_loss), and reading inside still works."""
    cal = _calibration(tmp_path, _own_corpus)
    f = load_calibration(cal).fit
    width = f.loss_max - f.loss_min
    model = "params: 45M, layers: 6, d_model: 512, heads: 8, seq_len: 64, vocab: 50257"
    near = _plan(tmp_path, cal, f"{f.loss_min - 0.8 * width:.4f}\n  extrapolate: true", model=model)
    assert solve(load_plan(near)).frontier.b_crit_tokens > 0
    far = _plan(tmp_path, cal, f"{f.loss_min - 1.2 * width:.4f}\n  extrapolate: true", model=model)
    errors = _errors(far)
    assert set(errors) == {"calibration-range"}
    e = errors["calibration-range"]
    assert e.location.line == 7 and "beyond what `extrapolate: true` reads" in e.message


def test_a_sensible_transfer_passes_every_check(tmp_path):
    """The target's own BPE tokens, a loss inside the measured range, a batch near B_crit: no error,
    no warning."""
    def own(data):
        data["provenance"]["data"].update(kind="tokens", source="train.bin", vocab_size=50257,
                                          token_stats=_stats(50256, 42_000))

    text, _ = _at_batch_plan(tmp_path, 2.0)
    cal = _calibration(tmp_path, own)
    plan = tmp_path / "p.yaml"
    plan.write_text(text.replace("target: {min_tokens: 2T}\n", "").replace("seq_len: 64", "seq_len: 64, vocab: 50257"))
    sol = solve(load_plan(plan))
    assert sol.feasible and sol.warnings == [], [w.code for w in sol.warnings]
    assert cal.exists()
