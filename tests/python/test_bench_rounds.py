"""The benchmarks' verdict rule (tools/bench/rounds.py) against scipy's binomial distribution and
hand-worked cases: the median's sign-test interval and the met / missed / undecided decision."""
import sys

import pytest
from scipy.stats import binom


@pytest.fixture
def rounds(source):
    sys.path.insert(0, str(source / "tools" / "bench"))
    import rounds as module
    return module


@pytest.mark.parametrize("n", range(1, 16))
def test_interval_coverage_matches_the_binomial(rounds, n):
    values = [float(v) for v in range(100, 100 + n)]
    low, high, coverage = rounds.median_interval(values)
    k = int(low) - 100 + 1  # the interval is x_(k) .. x_(n-k+1)
    assert high == values[n - k]
    # P(x_(k) <= median <= x_(n-k+1)) = 1 - 2 P(Binomial(n, 1/2) <= k - 1)
    assert coverage == pytest.approx(1 - 2 * binom.cdf(k - 1, n, 0.5), abs=1e-12)
    if k > 1:
        assert coverage >= rounds.CONFIDENCE
    wider = 1 - 2 * binom.cdf(k, n, 0.5)  # one more round dropped at each end
    assert k + 1 > (n + 1) // 2 or wider < rounds.CONFIDENCE


def test_five_rounds_use_the_whole_range(rounds):
    assert rounds.median_interval([3, 1, 2, 5, 4])[:2] == (1, 5)
    assert rounds.median([3, 1, 2, 5, 4]) == 3
    assert rounds.median([4, 1, 2, 3]) == 2.5


def test_nine_rounds_drop_one_round_at_each_end(rounds):
    paired = [1.10, 1.20, 1.05, 0.80, 1.30, 1.20, 1.10, 1.15, 1.12]
    assert rounds.median_interval(paired)[:2] == (1.05, 1.20)
    assert rounds.verdict(paired, 1.0) == "met"
    assert rounds.verdict(paired, 1.5) == "missed"
    assert rounds.verdict(paired, 1.1).startswith("undecided")


def test_one_bad_round_of_five_leaves_the_target_undecided(rounds):
    paired = [1.3, 1.25, 0.9, 1.4, 1.3]
    assert rounds.verdict(paired, 1.2).startswith("undecided")
    assert rounds.verdict([x + 0.5 for x in paired], 1.2) == "met"
    line = rounds.ratio_line("(a)/(b)", paired, 1.2)
    assert "median 1.30" in line and "94% interval 0.90-1.40" in line and "undecided" in line
