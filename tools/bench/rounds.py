"""Deciding a speed target from interleaved rounds on a machine whose load comes in bursts.

Every Python benchmark here runs its sides in turns, round after round, and compares each round's
pair (the two sides ran back to back, so they saw similar load). A burst of load from another
process slows whichever side it lands on, so one round's ratio proves nothing; the median of the
paired ratios does, with a distribution-free confidence interval from the order statistics (the
sign test: no assumption about the shape of the noise).

A target counts as met only when the whole interval lies at or above it, as missed only when the
whole interval lies below it; otherwise the rounds cannot tell and the benchmark says so. With
five rounds or fewer the interval is the range of the rounds (every round must meet the target);
with more rounds the most extreme rounds at each end may fall outside it, as many as the
confidence level allows (9 rounds: one at each end).
"""
from math import comb

CONFIDENCE = 0.9


def loadavg():
    with open('/proc/loadavg') as f:
        return ' '.join(f.read().split()[:3])


def median(values):
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def median_interval(values, confidence=CONFIDENCE):
    """(low, high, coverage): the order statistics x_(k) and x_(n-k+1) with the largest k whose
    probability of holding the true median between them is at least `confidence` (the sign test's
    interval); k = 1, the whole range, when no k reaches it."""
    s = sorted(values)
    n = len(s)
    coverage = lambda k: 1 - 2 * sum(comb(n, i) for i in range(k)) / 2 ** n  # noqa: E731
    k = 1
    while k + 1 <= (n + 1) // 2 and coverage(k + 1) >= confidence:
        k += 1
    return s[k - 1], s[n - k], coverage(k)


def verdict(paired, target):
    low, high, _ = median_interval(paired)
    if low >= target:
        return 'met'
    if high < target:
        return 'missed'
    return 'undecided: the rounds straddle the target, more rounds or a quieter machine needed'


def ratio_line(name, paired, target=None):
    """One line for a ratio: every round's value, the median, its interval and, with a target,
    the verdict."""
    low, high, cover = median_interval(paired)
    line = (f'{name} per round: ' + ', '.join(f'{r:.2f}' for r in paired) +
            f'; median {median(paired):.2f}, {100 * cover:.0f}% interval {low:.2f}-{high:.2f}')
    if target is not None:
        line += f'; target >= {target}: {verdict(paired, target)}'
    return line


def spread_line(name, values, unit='samples/s'):
    """A side's rounds and their spread (max - min, in % of the best)."""
    return (f'rounds {name} {unit}: ' + ', '.join(f'{x:.0f}' for x in values) +
            f'  (spread {100 * (max(values) - min(values)) / max(values):.1f}% of the best)')
