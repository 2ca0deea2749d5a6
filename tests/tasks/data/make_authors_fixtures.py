"""Rebuild recurrence_authors.json and revision_authors.json from the authors' own code.

    python tests/tasks/data/make_authors_fixtures.py AUTHORS_CHECKOUT OUT_DIR

AUTHORS_CHECKOUT is a checkout of vishalmisra/bayesian-wind-tunnel (MIT) at commit 670c6d6. The
tests never run this (they read the saved JSON); it records how the fixtures were made: the
authors' functions are called unchanged on the sequences and seeds below. Their
src/data/belief_revision_hard.py does not parse before Python 3.12 (an f-string in its demo), so
it is executed up to the demo.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import types
from pathlib import Path

import numpy as np

COMMIT = "670c6d61179492d57f13a7d710660f77d7b163e8"


def program(a: int, b: int, x0: int, p: int, L: int) -> list[int]:
    x = [x0]
    for _ in range(L - 1):
        x.append((a * x[-1] + b) % p)
    return x


def recurrence_cases(R) -> list[dict]:
    """Their predictive and class posterior on hand-picked and random sequences (p = 5, 7) and on
    their own generator's sequences at their setting (p = 17, integer and opaque)."""

    def curve(seq, p, pi):
        pred = [[float(R.bayesian_predictive_recurrence(list(seq[:t]), p, pi)[v]) for v in range(p)]
                for t in range(1, len(seq))]
        return pred, [float(R.class_posterior_recurrence(list(seq[:t]), p, pi)) for t in range(1, len(seq))]

    cases = []
    rng = np.random.default_rng(7)
    for p, L, pi in ((5, 10, 0.5), (7, 10, 0.3)):
        seqs = [program(2, 3, 1, p, L), program(0, 4, 2, p, L), program(1, 1, 0, p, L), [3] * L,
                [3, 3, 3, 1] + [1] * (L - 4), [2, 2] + [0] * (L - 2),
                program(3, 1, 4, p, 5) + [int(v) for v in rng.integers(0, p, L - 5)]]
        while len(seqs) < 16:
            if rng.random() < 0.5:
                seqs.append(program(*(int(v) for v in rng.integers(0, p, 3)), p, L))
            else:
                seqs.append([int(v) for v in rng.integers(0, p, L)])
        for s in seqs:
            pred, w = curve(s, p, pi)
            cases.append({"p": p, "pi": pi, "tokens": "integer", "sequence": [int(v) for v in s],
                          "predictive": pred, "p_program": w})
    np.random.seed(42)
    for opaque, n in ((False, 8), (True, 4)):
        cfg = R.RecurrenceConfig(p=17, pi=0.5, seq_len=16, opaque=opaque)
        for _ in range(n):
            tokens, gt, meta = R.generate_recurrence_sequence(cfg)
            shift = 17 if opaque else 0
            pred = [[float(g["pred_dist"].get(v + shift, 0.0)) for v in range(17)] for g in gt[1:]]
            cases.append({"p": 17, "pi": 0.5, "tokens": "opaque" if opaque else "integer",
                          "sequence": [int(v) for v in tokens], "header_len": meta["header_len"],
                          "true_class": meta["true_class"],
                          "predictive": pred,
                          "p_program": [float(g["p_program"]) for g in gt[1:]]})
    return cases


def revision_fixture(A, H) -> dict:
    cfg = A.BeliefRevisionConfig(n_candidates=2, m_filler=8, k_filler=8, n_entity_ids=100)
    tok = A.BeliefRevisionTokenizer(cfg)
    rng = np.random.default_rng(42)
    a_eps = []
    for _ in range(8):
        tokens, target, _, ids = A.generate_episode(cfg, tok, rng)
        a_eps.append({"tokens": [int(t) for t in tokens], "ids": [int(i) - tok.ID_OFFSET for i in ids],
                      "target": [float(v) for v in target[tok.ID_OFFSET:]]})
    hcfg = H.BeliefRevisionHardConfig(n_candidates=16, n_evidence=5, m_filler=4, dirichlet_alpha=0.3)
    htok = H.BeliefRevisionHardTokenizer(hcfg)
    with contextlib.redirect_stdout(io.StringIO()):
        task = H.BeliefRevisionHardTask(hcfg, seed=42)
    rng = np.random.default_rng(123)
    h_eps = []
    for _ in range(16):
        tokens, target, _, ent = task.generate_episode(htok, rng)
        ev = [int(tokens[i + 1]) - htok.ID_OFFSET for i in range(len(tokens) - 1) if tokens[i] == htok.EVIDENCE]
        h_eps.append({"tokens": [int(t) for t in tokens], "evidence": ev,
                      "target": [float(v) for v in target[htok.ID_OFFSET:]], "bayes_entropy": float(ent)})
    return {
        "source": "vishalmisra/bayesian-wind-tunnel (MIT)", "commit": COMMIT,
        "version_a": {"functions": "src/data/belief_revision.py: generate_episode (n_candidates=2, m_filler=8, "
                                   "k_filler=8, n_entity_ids=100; np.random.default_rng(42))",
                      "layout": "tokens: theirs (INTRO 1, FILLER 2, PRONOUN 3, CUE 4, QUERY 5, entity e as 10 + e); "
                                "target: their float32 target at the query over entities 0..99",
                      "episodes": a_eps},
        "hard": {"functions": "src/data/belief_revision_hard.py: BeliefRevisionHardTask(seed=42).emission_matrix, "
                              "generate_episode (n_candidates=16, n_evidence=5, m_filler=4, alpha=0.3; "
                              "np.random.default_rng(123))",
                 "emission": [[float(v) for v in r] for r in task.emission_matrix],
                 "layout": "tokens: theirs (INTRO 1, FILLER 2, PRONOUN 3, EVIDENCE 4, QUERY 5, candidate z as "
                           "10 + z); target: their float32 posterior at the query over candidates 0..15; "
                           "bayes_entropy: their float64 entropy in bits",
                 "episodes": h_eps},
    }


def main(root: Path, out: Path) -> None:
    sys.path[:0] = [str(root / "experiments" / "construction_boundary"), str(root)]
    import recurrence_bwt as R  # noqa: N812 (theirs)
    from src.data import belief_revision as A  # noqa: N812

    source = (root / "src" / "data" / "belief_revision_hard.py").read_text()
    H = sys.modules["belief_revision_hard"] = types.ModuleType("belief_revision_hard")  # noqa: N806
    exec(compile(source[:source.index("# Quick test")], "belief_revision_hard.py", "exec"), H.__dict__)
    recurrence = {"source": "vishalmisra/bayesian-wind-tunnel (MIT)", "commit": COMMIT,
                  "functions": "experiments/construction_boundary/recurrence_bwt.py: bayesian_predictive_recurrence, "
                               "class_posterior_recurrence, generate_recurrence_sequence (np.random.seed(42))",
                  "layout": "predictive[i] is their P(x_{i+1} = v | x_0..x_i), v = 0..p-1 (opaque: v is the opaque "
                            "class, token p + v); sequence is their token list (opaque: with their header)",
                  "cases": recurrence_cases(R)}
    (out / "recurrence_authors.json").write_text(json.dumps(recurrence, separators=(",", ":")))
    (out / "revision_authors.json").write_text(json.dumps(revision_fixture(A, H), separators=(",", ":")))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
