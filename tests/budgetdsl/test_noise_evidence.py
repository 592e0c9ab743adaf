"""Issue 25 items 2 and 3: the decisions drawn from bench/noise_evidence.py's sweeps are what its
committed output, docs/noise-evidence.csv, says — the planner's default noise scale is the one that
tracked the directly measured B_crit more closely, and γ of B_crit ∝ context^γ is their fit."""

import csv
import math
import pathlib

import pytest

from budgetdsl.theory.context_scaling import CONTEXT_GAMMA, CONTEXT_GAMMA_SIGMA, fit_context_exponent
from budgetdsl.theory.noise_scale import DEFAULT_NOISE_SCALE, agreement, preferred

EVIDENCE = pathlib.Path(__file__).resolve().parents[2] / "docs/noise-evidence.csv"


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return list(csv.DictReader(EVIDENCE.open()))


def test_the_evidence_covers_two_proxies_two_contexts_and_several_seeds(rows):
    cells = {(r["proxy"], int(r["context"])) for r in rows}
    assert {p for p, _ in cells} >= {"gpt-nano", "gpt-micro"} and {c for _, c in cells} >= {64, 128}
    for cell in cells:
        assert len({r["seed"] for r in rows if (r["proxy"], int(r["context"])) == cell}) >= 3
    for r in rows:  # each ratio is the sweep's B_crit over the B_simple of the same sweeps
        assert float(r["ratio_raw"]) == pytest.approx(float(r["b_crit_tokens"]) / float(r["b_raw_tokens"]), rel=1e-4)
        assert float(r["ratio_pre"]) == pytest.approx(float(r["b_crit_tokens"]) / float(r["b_pre_tokens"]), rel=1e-4)


def test_the_default_noise_scale_is_the_one_closer_to_the_measured_b_crit(rows):
    ratios = {"raw": [float(r["ratio_raw"]) for r in rows],
              "preconditioned": [float(r["ratio_pre"]) for r in rows]}
    assert preferred(ratios) == DEFAULT_NOISE_SCALE
    chosen, other = (agreement(ratios[k]) for k in (DEFAULT_NOISE_SCALE, "preconditioned"
                                                     if DEFAULT_NOISE_SCALE == "raw" else "raw"))
    assert chosen.rms_log < other.rms_log and chosen.n == other.n == len(rows)


def test_agreement_against_closed_forms():
    a = agreement([2.0, 0.5, 2.0, 0.5])
    assert a.geo_mean == pytest.approx(1.0) and a.rms_log == pytest.approx(math.log(2.0))
    assert a.sd_log == pytest.approx(math.log(2.0) * math.sqrt(4 / 3))  # sample sd, n - 1
    assert preferred({"near": [1.1, 0.9], "far": [3.0, 1.0]}) == "near"  # bias counts, not only spread


def test_the_context_exponent_is_the_fit_of_the_evidence(rows):
    """One group per proxy and seed (its two contexts); γ and σ_γ as budgetdsl.theory.context_scaling
    holds them, to the two decimals it keeps."""
    groups: dict[tuple[str, str], list] = {}
    for r in rows:
        groups.setdefault((r["proxy"], r["seed"]), []).append(
            (int(r["context"]), float(r["b_crit_tokens"]), float(r["b_crit_rel_se"])))
    fit = fit_context_exponent([sorted(g) for g in groups.values()])
    assert fit.n == 6
    assert fit.gamma == pytest.approx(CONTEXT_GAMMA, abs=0.005)
    assert fit.sigma == pytest.approx(CONTEXT_GAMMA_SIGMA, abs=0.005)
