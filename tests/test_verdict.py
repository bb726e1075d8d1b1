"""The one verdict rule of ``examples/_common.py`` that grades every row of SUMMARY.md."""

from __future__ import annotations

import math

import pytest


@pytest.fixture
def common(examples_import):
    return examples_import("_common", ["test_verdict.py"])


def test_one_loo_error_apart_is_a_match_at_77_samples(common):
    # Logo Table 4, DLBCL: the paper's 2/77 against our 3/77 (the old rule called it worse)
    assert common.count_verdict(3, 2, 77) == "match"
    assert common.count_verdict(1, 2, 77) == "match"
    assert common.count_verdict(5, 2, 77) == "worse"
    assert common.count_verdict(0, 4, 77) == "better"


@pytest.mark.parametrize(
    "paper, n, tolerance",
    [
        (2, 77, math.sqrt(2 * 75 / 77)),  # 1.40
        (15, 60, math.sqrt(60 * 0.25 * 0.75)),  # 3.35
        (0, 62, 1.0),  # a rate of 0 has no spread: one error
        (1, 72, 1.0),  # sqrt(71/72) < 1: one error
        (0.243 * 768, 768, math.sqrt(768 * 0.243 * 0.757)),  # 11.9
        (100, 100, 1.0),  # a rate of 1, successes
    ],
)
def test_tolerance_is_the_binomial_standard_error_never_below_one(common, paper, n, tolerance):
    assert common.count_tolerance(paper, n) == pytest.approx(tolerance)
    # just inside and just outside, in both directions
    assert common.count_verdict(paper + 0.99 * tolerance, paper, n) == "match"
    assert common.count_verdict(paper + 1.01 * tolerance, paper, n) == "worse"
    if paper - 1.01 * tolerance >= 0:
        assert common.count_verdict(paper - 1.01 * tolerance, paper, n) == "better"
    assert str(n) in common.count_rule(paper, n)


def test_rates_successes_and_bad_n(common):
    assert common.rate_verdict(0.254, 0.243, 768) == "match"  # CPFS Table 4, pima: 1.1 pp
    assert common.rate_verdict(0.170, 0.021, 351) == "worse"  # ionosphere
    # accuracy: higher is better (Zarkoob's SHS-SVM, lymphoma: 90 vs 93 correct of 96)
    assert common.count_verdict(90, 93, 96, lower_is_better=False) == "worse"
    assert common.count_verdict(95, 93, 96, lower_is_better=False) == "better"
    with pytest.raises(ValueError, match="n = 0"):
        common.count_tolerance(1, 0)


def test_a_four_way_tie_is_not_better(common):
    errs = [0.254, 0.254, 0.254, 0.254, 0.349]  # CPFS, Jolliffe NI, I, SPCA, PFA on pima
    ranks = common.rank_among(errs, 0)
    assert ranks == (1, 4)
    assert common.rank_text(ranks, 5) == "tied for 1st of 5 (ranks 1–4)"
    assert common.rank_verdict(ranks, 2) == "match"  # the paper's rank 2: match at best
    assert common.rank_verdict(ranks, 1) == "match"
    assert common.rank_verdict((1, 1), 2) == "better"  # only alone in front
    assert common.rank_verdict((2, 3), 1) == "worse"
    assert common.rank_text((2, 2), 5) == "rank 2 of 5"


def test_ties_use_the_count_tolerance(common):
    # glass, 214 samples: SPCA 6 pp ahead of CPFS (beyond 3.4 pp), Jolliffe NI 1 pp (within)
    ranks = common.rank_among([0.434, 0.423, 0.434, 0.373, 0.447], 0, n=214)
    assert ranks == (2, 5)
    assert common.rank_verdict(ranks, 1) == "worse"
    assert common.rank_among([0.434, 0.423, 0.434, 0.373, 0.447], 0) == (3, 4)  # exact ties only


def test_win_tie_loss_only_on_the_same_data_sets(common):
    paper = {"a": "tie", "b": "loss", "c": "tie", "d": "tie", "e": "loss", "f": "loss", "g": "tie"}
    ours = {"a": "tie", "b": "loss", "c": "tie", "d": "tie"}
    v, o, p = common.wtl_verdict(ours, paper)  # the paper's 0/4/3 over 7 restricted to 4 sets
    assert (v, o, p) == ("match", "0/3/1 over 4 data sets", "0/3/1 over 4 data sets")
    v, _, _ = common.wtl_verdict({"a": "win", "b": "loss"}, paper)
    assert v == "worse"  # the competitor does better against the paper's method than it says
    v, _, _ = common.wtl_verdict({"a": "loss", "b": "loss"}, paper)
    assert v == "better"
    with pytest.raises(ValueError, match="no outcome for \\['z'\\]"):
        common.wtl_verdict({"a": "tie", "z": "loss"}, paper)
    with pytest.raises(ValueError, match="both ran"):
        common.wtl_verdict({}, paper)


def test_paper_outcomes_recovered_from_printed_means(common):
    # Sun et al. 2010 Table 2, KS against Logo: 0/4/3 printed as a total only
    ks = {
        "twonorm": ((4.6, 0.9, 10), (4.1, 0.9, 10)),
        "waveform": ((14.0, 1.4, 10), (13.8, 1.1, 10)),
        "banana": ((32.3, 4.9, 10), (10.9, 0.5, 10)),
        "diabetics": ((27.0, 2.3, 10), (27.7, 2.4, 10)),
        "thyroid": ((16.3, 9.7, 10), (6.4, 2.7, 10)),
        "heart": ((23.1, 3.5, 10), (19.0, 5.2, 10)),
        "splice": ((23.5, 1.0, 10), (17.8, 1.9, 10)),
    }
    got = {k: common.outcome_from_means(*v) for k, v in ks.items()}
    assert common.wtl_text(got) == "0/4/3"
    assert got["banana"] == "loss" and got["heart"] == "tie"
    assert common.outcome_from_means((1.0, 0.1, 10), (5.0, 0.1, 10)) == "win"


def test_means_within_two_standard_errors(common):
    assert common.mean_verdict((22.3, 3.3, 10), (19.0, 5.2, 10)) == "match"  # heart
    assert common.mean_verdict((26.4, 4.5, 10), (17.8, 1.9, 10)) == "worse"
    assert common.mean_verdict((10.0, 0.5, 10), (12.0, 0.5, 10)) == "better"


def test_supervised_better_only_on_the_inside_fold_figure(common):
    # Zarkoob RFE-SVM, colon: 0/62 with the genes ranked on all samples, 11/62 inside LOO
    assert common.supervised_verdict(9, once=0, inside=11, n=62) == "match"
    assert common.supervised_verdict(9, once=0, inside=2, n=62) == "better"
    assert common.supervised_verdict(1, once=0, inside=2, n=72) == "match"  # leukemia
    assert common.supervised_verdict(3, once=8, inside=4, n=96) == "worse"


def test_close_to_best(common):
    # CPFS gene ALL at q = 20: 5.07 % above PFA is close; ionosphere q = 10: 16 % is not
    assert common.close_to_best(0.4123, [0.4123, 0.4218, 0.4486, 0.3924])
    assert not common.close_to_best(0.4099, [0.4099, 0.3599, 0.4486, 0.3533])


def test_not_comparable_needs_a_reason(common):
    with pytest.raises(ValueError, match="needs the reason"):
        common.entry("Table 4, prostate", "16.5", "2.0", "not comparable", "")
    with pytest.raises(ValueError, match="needs the reason"):
        common.entry("Table 4, prostate", "16.5", "2.0", "not comparable", "  ")
    row = common.entry("Table 4", "16.5", "2.0", "not comparable", "another task")
    assert row["reason"] == "another task"
    with pytest.raises(ValueError, match="use match"):
        common.entry("Table 4", "1", "2", "rank 1", "")


def test_the_rules_examples_run(common):
    import doctest

    result = doctest.testmod(common)
    assert result.attempted >= 10 and result.failed == 0


@pytest.mark.parametrize("quick", [False, True])
def test_summary_states_the_rule_and_lists_what_was_not_attempted(
    tmp_path, monkeypatch, examples_import, quick
):
    import sys

    ra = examples_import("reproduce_all", ["reproduce_all.py", *(["--quick"] if quick else [])])
    common = sys.modules["_common"]
    monkeypatch.setattr(common, "results_dir", lambda: tmp_path)
    monkeypatch.setattr(ra, "results_dir", lambda: tmp_path)
    row = common.entry(
        "Table 4, DLBCL", "2/77", "3/77", common.count_verdict(3, 2, 77), common.count_rule(2, 77)
    )
    common.write_summary("logo_microarray", [row])
    text, fresh = ra.summary_md(0.0, [], [])
    assert (
        fresh and "| Table 4, DLBCL | 2/77 | 3/77 | **match** — match = within 1.4 errors" in text
    )
    assert "binomial standard error" in text and "## Not attempted" in text
    not_attempted = text.split("## Not attempted")[1].split("##")[0]
    assert not_attempted.count("\n* ") == len(ra.NOT_ATTEMPTED) and "Logo Fig. 4" in not_attempted
    # the quick summary points to the full-protocol one, the reference
    assert ("(full/SUMMARY.md)" in text) == quick
