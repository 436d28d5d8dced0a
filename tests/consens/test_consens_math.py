import math

import pytest

from ragsense.consens import (
    STATED_AGGREGATIONS,
    WORD_AGGREGATIONS,
    Aggregation,
    consens_from_log_ppl,
    consens_from_word_nll,
    log_mean_perplexity,
)

TABLE1_EMPTY = (4814.38, 7117.1, 1.61)
TABLE1_DAVID_BAKER_SCIENTIST = (263.73, 293.92, 1.72)


def _nll(ppls: tuple[float, ...]) -> list[float]:
    return [math.log(p) for p in ppls]


def test_paper_table1_first_row_is_0_91() -> None:
    consens, r = consens_from_word_nll(
        _nll(TABLE1_EMPTY), _nll(TABLE1_DAVID_BAKER_SCIENTIST), Aggregation.ARITHMETIC
    )
    assert round(consens, 2) == 0.91
    assert r == pytest.approx(math.log((sum(TABLE1_EMPTY) / 3) / (sum(TABLE1_DAVID_BAKER_SCIENTIST) / 3)))


def test_sigmoid_form_equals_tanh_form() -> None:
    for r in (-30.0, -2.5, -0.1, 0.0, 0.3, 4.0, 30.0):
        paper = 2.0 / (1.0 + math.exp(-r)) - 1.0
        assert consens_from_log_ppl(r, 0.0)[0] == pytest.approx(paper, abs=1e-12)


def test_geometric_is_exp_of_mean_nll() -> None:
    nll = _nll(TABLE1_EMPTY)
    assert math.exp(log_mean_perplexity(nll, Aggregation.GEOMETRIC)) == pytest.approx(
        (4814.38 * 7117.1 * 1.61) ** (1 / 3)
    )


def test_huge_perplexities_do_not_overflow() -> None:
    consens, r = consens_from_word_nll([2000.0, 5.0], [1.0, 1.0], Aggregation.ARITHMETIC)
    assert math.isfinite(r) and consens == pytest.approx(1.0)


def test_bounds_and_sign() -> None:
    assert consens_from_word_nll([5.0], [1.0], Aggregation.GEOMETRIC)[0] > 0
    assert consens_from_word_nll([1.0], [5.0], Aggregation.GEOMETRIC)[0] < 0
    assert consens_from_word_nll([3.0], [3.0], Aggregation.GEOMETRIC)[0] == 0.0


def test_rejects_empty_and_non_finite() -> None:
    with pytest.raises(ValueError):
        log_mean_perplexity([], Aggregation.ARITHMETIC)
    with pytest.raises(ValueError):
        log_mean_perplexity([float("nan")], Aggregation.ARITHMETIC)
    with pytest.raises(ValueError):
        consens_from_word_nll([1.0], [1.0, 2.0], Aggregation.ARITHMETIC)


def test_word_level_aggregates_read_the_word_contrasts() -> None:
    empty = [5.0, 4.0, 3.0, 2.0]
    context = [1.0, 1.0, 1.0, 4.0]  # three words helped by 4, 3, 2 nats; one hurt by 2
    r = {
        a: consens_from_word_nll(empty, context, a)[1]
        for a in WORD_AGGREGATIONS
        if a not in STATED_AGGREGATIONS
    }
    assert r[Aggregation.GEOMETRIC] == pytest.approx(1.75)
    assert r[Aggregation.MIN_WORD] == -2.0
    assert r[Aggregation.Q25] == pytest.approx(-2.0 + 0.75 * 4.0)  # between -2 and 2
    assert r[Aggregation.TAIL25] == -2.0
    assert r[Aggregation.MEAN_TAIL] == pytest.approx((1.75 - 2.0) / 2)
    share = consens_from_word_nll(empty, context, Aggregation.SHARE)[0]
    assert share == pytest.approx(2 * (3.5 / 5) - 1)
    # A single badly grounded word moves the low aggregates, hardly the mean.
    assert r[Aggregation.MIN_WORD] < r[Aggregation.Q10] < r[Aggregation.GEOMETRIC]


def test_every_aggregate_is_bounded_and_zero_without_effect() -> None:
    for agg in (a for a in WORD_AGGREGATIONS if a not in STATED_AGGREGATIONS):
        same = consens_from_word_nll([2.0, 3.0], [2.0, 3.0], agg)[0]
        assert same == pytest.approx(0.0) or agg is Aggregation.SHARE
        assert -1.0 < consens_from_word_nll([900.0], [1.0], agg)[0] <= 1.0
    # With no word helped, the share score is below zero; with every word helped, above.
    assert consens_from_word_nll([1.0, 1.0], [1.0, 1.0], Aggregation.SHARE)[0] < 0
    assert consens_from_word_nll([3.0, 3.0], [1.0, 1.0], Aggregation.SHARE)[0] > 0


def test_perplexity_mean_refuses_word_level_aggregates() -> None:
    with pytest.raises(ValueError):
        log_mean_perplexity([1.0], Aggregation.Q10)


def test_support_counts_stated_words_as_supported_and_reads_the_others_contrast() -> None:
    empty, context = [5.0, 4.0, 3.0], [9.0, 1.0, 3.0]  # contrasts -4, +3, 0
    with pytest.raises(ValueError, match="stated flag"):
        consens_from_word_nll(empty, context, Aggregation.SUPPORT)
    all_stated = consens_from_word_nll(empty, context, Aggregation.SUPPORT, [True, True, True])
    assert all_stated == (1.0, 0.0)
    none_stated, r = consens_from_word_nll(empty, context, Aggregation.SUPPORT, [False, False, False])
    expected_r = sum(-math.log1p(math.exp(-(d - 1.0))) for d in (-4.0, 3.0, 0.0)) / 3
    assert r == pytest.approx(expected_r) and none_stated == pytest.approx(2 * math.exp(expected_r) - 1)
    # Stating the badly supported word raises the score; stating the well supported one hardly does.
    worst = consens_from_word_nll(empty, context, Aggregation.SUPPORT, [True, False, False])[0]
    best = consens_from_word_nll(empty, context, Aggregation.SUPPORT, [False, True, False])[0]
    assert worst > best > none_stated
    # Bounded, finite and never NaN however unlikely a word is.
    extreme = consens_from_word_nll([1.0], [5000.0], Aggregation.SUPPORT, [False])
    assert -1.0 <= extreme[0] < 0.0 and math.isfinite(extreme[1])


def test_support_count_adds_the_expected_number_of_unsupported_words() -> None:
    empty, context = [5.0, 4.0, 3.0], [9.0, 1.0, 3.0]  # contrasts -4, +3, 0
    with pytest.raises(ValueError, match="stated flag"):
        consens_from_word_nll(empty, context, Aggregation.SUPPORT_COUNT)
    assert consens_from_word_nll(empty, context, Aggregation.SUPPORT_COUNT, [True] * 3) == (1.0, 0.0)
    flags = [False, False, True]
    score, r = consens_from_word_nll(empty, context, Aggregation.SUPPORT_COUNT, flags)
    expected = sum(1.0 / (1.0 + math.exp(-(1.0 - d))) for d in (-4.0, 3.0))  # 1 - sigmoid(d - 1) each
    assert r == pytest.approx(-expected)
    support = consens_from_word_nll(empty, context, Aggregation.SUPPORT, flags)[0]
    assert score == pytest.approx((support + 2.0 * math.exp(-expected) - 1.0) / 2.0)

    # A count, not a share: the same unsupported word costs the same however many stated words surround
    # it, so a long answer cannot dilute an invented claim; support's share can.
    def score_of(agg: Aggregation, x: tuple[list[float], list[float], list[bool]]) -> float:
        return consens_from_word_nll(x[0], x[1], agg, x[2])[0]

    one_bad = ([5.0], [9.0], [False])
    diluted = ([5.0] + [3.0] * 9, [9.0] + [1.0] * 9, [False] + [True] * 9)
    count_part = [
        2 * score_of(Aggregation.SUPPORT_COUNT, x) - score_of(Aggregation.SUPPORT, x)
        for x in (one_bad, diluted)
    ]
    assert count_part[0] == pytest.approx(count_part[1])
    assert score_of(Aggregation.SUPPORT, diluted) > score_of(Aggregation.SUPPORT, one_bad)
    extreme = consens_from_word_nll([1.0] * 50, [5000.0] * 50, Aggregation.SUPPORT_COUNT, [False] * 50)
    assert -1.0 <= extreme[0] < -0.9 and math.isfinite(extreme[1])
