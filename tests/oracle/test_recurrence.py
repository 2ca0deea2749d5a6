"""The modular-recurrence mixture's oracle (oracle/recurrence.py): the closed form against the
mixture summed over every program (a, b), on every branch (random, a = 0, a = 1, constant, broken
after a constant prefix, lengths 1 to 9, p = 2..7), against the Bayes factors 1, 1, 1, p, p^2, ...,
and bad inputs. The authors' own numbers: tests/tasks/test_recurrence.py."""

from __future__ import annotations

import math

import pytest
import torch

from bayesbench.oracle.recurrence import recurrence_brute_force, recurrence_class_posterior, recurrence_predictive


def program(a: int, b: int, x0: int, p: int, L: int) -> list[int]:
    x = [x0]
    for _ in range(L - 1):
        x.append((a * x[-1] + b) % p)
    return x


def sequences(p: int, L: int, seed: int) -> torch.Tensor:
    """Random sequences, recurrences (a = 0, a = 1 and any), constant prefixes, and a recurrence
    broken after a fixed point: every branch of the closed form."""
    g = torch.Generator().manual_seed(seed)
    rows = [torch.randint(0, p, (L,), generator=g).tolist() for _ in range(6)]
    for _ in range(6):
        a, b, x0 = (int(v) for v in torch.randint(0, p, (3,), generator=g))
        rows.append(program(a, b, x0, p, L))
    rows += [program(0, 1 % p, 0, p, L), program(1, 1 % p, 0, p, L), [1 % p] * L,
             ([1 % p] * 3 + [0] * L)[:L], program(1, 0, 0, p, L)]
    return torch.tensor(rows)


@pytest.mark.parametrize("p", [2, 3, 5, 7])
@pytest.mark.parametrize("pi", [0.0, 0.3, 0.5, 0.999])
@pytest.mark.parametrize("L", [1, 2, 3, 9])
def test_closed_form_equals_the_sum_over_every_program(p, pi, L):
    x = sequences(p, L, seed=p * 100 + L)
    torch.testing.assert_close(recurrence_predictive(x, p, pi, dtype=torch.float64),
                               recurrence_brute_force(x, p, pi), atol=1e-12, rtol=0)


def test_pi_one_keeps_only_recurrences():
    x = torch.tensor([program(3, 2, 1, 5, 8), [2] * 8])
    pred = recurrence_predictive(x, 5, 1.0, dtype=torch.float64)
    torch.testing.assert_close(pred, recurrence_brute_force(x, 5, 1.0), atol=1e-12, rtol=0)
    assert (pred[:, 2:].max(-1).values == 1).all()  # from three symbols on, a point mass


def test_bayes_factor_is_one_three_times_then_grows_by_p():
    """Their "pi moment": BF = 1, 1, 1, p, p^2, ... on a generic recurrence (x_0 != x_1)."""
    p, pi = 17, 0.5
    x = torch.tensor([program(3, 7, 2, p, 8)])
    w = recurrence_class_posterior(x, p, pi)[0]
    bf = w / (1 - w)
    want = torch.tensor([1, 1, 1, p, p**2, p**3, p**4, p**5], dtype=torch.float64)
    torch.testing.assert_close(bf, want, rtol=1e-9, atol=0)


def test_entropy_curve_at_the_authors_setting():
    """pi = 1/2, p = 17: H = log2 p until three symbols are seen (x_0 != x_1), then the mixture of a
    point mass with weight p^(k-3) / (p^(k-3) + 1) and the uniform."""
    x = torch.tensor([program(3, 7, 2, 17, 6)])
    pred = recurrence_predictive(x, 17, 0.5, dtype=torch.float64)[0]
    h = -(pred * pred.log2()).sum(-1)
    assert abs(h[0] - math.log2(17)) < 1e-12 and abs(h[1] - math.log2(17)) < 1e-12
    w = 17 / 18
    top = w + (1 - w) / 17
    want = -(top * math.log2(top) + 16 * ((1 - w) / 17) * math.log2((1 - w) / 17))
    assert abs(h[3] - want) < 1e-12


def test_bad_oracle_inputs_are_refused():
    with pytest.raises(ValueError, match="p must be a prime"):
        recurrence_predictive(torch.zeros((1, 3), dtype=torch.long), 9, 0.5)
    with pytest.raises(ValueError, match=r"seq must lie in \[0, 4\]"):
        recurrence_predictive(torch.tensor([[0, 5]]), 5, 0.5)
    with pytest.raises(ValueError, match="pi must be a number"):
        recurrence_brute_force(torch.zeros((1, 3), dtype=torch.long), 5, 2.0)
