"""Throughput of the wind-tunnel samplers and of the reference oracle (pytest-benchmark).

Each sampler is compared, in the same run, with a per-sequence Python loop (how the papers'
scripts generate data), so the ratio is meaningful on a noisy machine. Throughput
(sequences/s) and the ratio land in `extra_info`. Report-only: no speed goal is stated or asserted.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from timing import best_of

from bayesbench.oracle import bijection_posterior, hmm_filter
from bayesbench.tasks import get_task

torch.set_num_threads(2)
BATCH = 8192
TASKS = [
    ("bijection", {"V": 20}),
    ("bijection", {"V": 20, "variant": "code"}),
    ("hmm", {"K": 20}),
    ("hmm", {"K": 20, "encoding": "tokens"}),
    ("sticky", {}),
    ("markov", {}),
]


def loop_bijection(n, V, rng):
    """Per-sequence Python loop: permutation, pairs, posterior by elimination."""
    out = []
    for _ in range(n):
        perm, keys = rng.permutation(V), rng.permutation(V)
        post = np.zeros((V, V))
        used = np.zeros(V, bool)
        for k, x in enumerate(keys):
            post[k, ~used] = 1.0 / (~used).sum()
            used[perm[x]] = True
        out.append((keys, perm[keys], post))
    return out


def loop_hmm(n, S, V, K, rng):
    """Per-sequence Python loop: HMM draw, path, forward filter."""
    out = []
    for _ in range(n):
        T, E = rng.dirichlet(np.ones(S), S), rng.dirichlet(np.ones(V), S)
        s = rng.integers(S)
        alpha = np.full(S, 1.0 / S)
        post = np.zeros((K, S))
        for t in range(K):
            if t:
                s = rng.choice(S, p=T[s])
                alpha = alpha @ T
            o = rng.choice(V, p=E[s])
            alpha = alpha * E[:, o]
            alpha /= alpha.sum()
            post[t] = alpha
        out.append(post)
    return out


@pytest.mark.parametrize("name,config", TASKS,
                         ids=[f"{n}-{c.get('variant', c.get('encoding', 'default'))}" for n, c in TASKS])
def test_sampling_throughput(benchmark, name, config):
    task = get_task(name, **config)
    g = torch.Generator().manual_seed(0)
    task.sample(64, g)  # warm-up
    benchmark.pedantic(lambda: task.sample(BATCH, g), rounds=3, iterations=1)
    seconds = benchmark.stats.stats.min
    benchmark.extra_info["sequences_per_s"] = round(BATCH / seconds)
    rng = np.random.default_rng(0)
    n_loop = 512
    if name == "bijection" and config.get("variant") is None:
        loop = best_of(lambda: loop_bijection(n_loop, 20, rng), 2) / n_loop
    elif name == "hmm" and config.get("encoding") is None:
        loop = best_of(lambda: loop_hmm(n_loop, 5, 5, 20, rng), 2) / n_loop
    else:
        return
    benchmark.extra_info["loop_sequences_per_s"] = round(1.0 / loop)
    benchmark.extra_info["speedup_vs_python_loop"] = round(loop * BATCH / seconds, 1)


def test_reference_hmm_filter_throughput(benchmark):
    """B = 65536 HMMs x L = 50 steps, S = V = 5, float32 (the compiled-oracle benchmark size)."""
    B, L = 65536, 50
    g = torch.Generator().manual_seed(0)
    trans, emit, _ = get_task("hmm").sample_hmms(B, g)
    obs = torch.randint(0, 5, (B, L), generator=g)
    benchmark.pedantic(lambda: hmm_filter(trans, emit, obs, backend="reference"), rounds=3, iterations=1)
    benchmark.extra_info["hmm_steps_per_s"] = round(B * L / benchmark.stats.stats.min)


def test_reference_bijection_posterior_throughput(benchmark):
    B, V = 65536, 20
    g = torch.Generator().manual_seed(0)
    keys = torch.rand(B, V, generator=g).argsort(-1)
    values = torch.rand(B, V, generator=g).argsort(-1).gather(1, keys)
    benchmark.pedantic(lambda: bijection_posterior(keys, values, V, backend="reference"), rounds=3, iterations=1)
    benchmark.extra_info["sequences_per_s"] = round(B / benchmark.stats.stats.min)
