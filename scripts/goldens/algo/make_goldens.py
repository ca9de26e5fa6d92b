#!/usr/bin/env python3
"""Goldens for host/algo: the RL formulas of veRL's core_algos.py (as described in
docs/algorithms.md), written out independently here in PyTorch float64; every gradient comes
from torch autograd.

    python3 scripts/goldens/algo/make_goldens.py host/algo/testdata

Inputs are float32 values (stored exactly in JSON), so the Go side sees the same numbers.
"""
import json
import math
import os
import sys

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
RNG = np.random.default_rng(20261122)


def f32(a):
    """numpy float32 array -> list of Python floats (exact)."""
    return [float(x) for x in np.asarray(a, dtype=np.float32).reshape(-1)]


def t64(a):
    return torch.tensor(np.asarray(a, dtype=np.float32).astype(np.float64))


def rand(shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, size=shape).astype(np.float32)


# ---------------------------------------------------------------- reference formulas

def masked_mean(x, m):
    return (x * m).sum() / (m.sum() + 1e-8)


def masked_whiten(x, m):
    n = m.sum()
    if n == 0:
        return x.clone()
    mean = masked_mean(x, m)
    var = masked_mean((x - mean) ** 2, m)
    if n > 1:
        var = var * n / (n - 1)
    return (x - mean) * torch.rsqrt(var + 1e-8)


def grpo(r, m, groups, norm):
    s = r.sum(-1)
    out = torch.zeros_like(s)
    for g in set(groups):
        idx = [i for i, x in enumerate(groups) if x == g]
        ss = s[idx]
        if len(idx) == 1:
            mean, std = torch.tensor(0.0), torch.tensor(1.0)
        else:
            mean, std = ss.mean(), ss.std()  # unbiased
        out[idx] = (ss - mean) / (std + 1e-6) if norm else ss - mean
    a = out.unsqueeze(-1) * m
    return a, a


def gae(r, v, m, gamma, lam):
    B, T = r.shape
    nextv = torch.zeros(B)
    last = torch.zeros(B)
    rev = []
    for t in reversed(range(T)):
        delta = r[:, t] + gamma * nextv - v[:, t]
        g = delta + gamma * lam * last
        nextv = v[:, t] * m[:, t] + (1 - m[:, t]) * nextv
        last = g * m[:, t] + (1 - m[:, t]) * last
        rev.append(last)
    a = torch.stack(rev[::-1], dim=1)
    ret = a + v
    return masked_whiten(a, m), ret


def rpp(r, m, gamma):
    B, T = r.shape
    ret = torch.zeros_like(r)
    run = torch.zeros(B)
    for t in reversed(range(T)):
        run = r[:, t] + gamma * run
        ret[:, t] = run
        run = run * m[:, t]
    return masked_whiten(ret, m) * m, ret


def group_ids(groups):
    ids = {}
    for i, g in enumerate(groups):
        ids.setdefault(g, []).append(i)
    return ids


def rpp_baseline(r, m, groups):
    s = r.sum(-1)
    c = s.clone()
    for idx in group_ids(groups).values():
        mean = s[idx].mean() if len(idx) > 1 else torch.tensor(0.0)
        c[idx] = s[idx] - mean
    tiled = c.unsqueeze(-1).tile([1, r.shape[1]]) * m
    a = masked_whiten(tiled, m) * m
    return a, a


def rloo(r, m, groups):
    s = r.sum(-1)
    a = s.clone()
    for idx in group_ids(groups).values():
        n = len(idx)
        if n > 1:
            a[idx] = s[idx] * n / (n - 1) - s[idx].mean() * n / (n - 1)
    a = a.unsqueeze(-1) * m
    return a, a


def opo(r, m, groups):
    s = r.sum(-1)
    lens = m.sum(-1)
    a = s.clone()
    for idx in group_ids(groups).values():
        bsl = torch.tensor(0.0)
        if len(idx) > 1:
            bsl = (lens[idx] * s[idx]).sum() / lens[idx].sum()
        a[idx] = s[idx] - bsl
    a = a.unsqueeze(-1) * m
    return a, a


def grpo_passk(r, m, groups, norm):
    s = r.sum(-1)
    a = torch.zeros_like(s)
    for idx in group_ids(groups).values():
        rewards = s[idx]
        top, top_i = torch.topk(rewards, 2)
        v = top[0] - top[1]
        if norm:
            v = v / (rewards.std() + 1e-6)
        a[idx[int(top_i[0])]] = v
    a = a.unsqueeze(-1) * m
    return a, a


def gpg(r, m, groups):
    s = r.sum(-1)
    B = s.shape[0]
    alpha = B / max(int(torch.count_nonzero(s)), 1)
    a = s.clone()
    for idx in group_ids(groups).values():
        mean = s[idx].mean() if len(idx) > 1 else torch.tensor(0.0)
        a[idx] = alpha * (s[idx] - mean)
    a = a.unsqueeze(-1) * m
    return a, a


def agg(L, m, mode, gtok=0, gseq=0, normlen=0):
    if mode == "token-mean":
        n = gtok if gtok else m.sum()
        if float(n) == 0:
            return (L * 0).sum()
        return (L * m).sum() / n
    if mode in ("seq-mean-token-sum", "seq-mean-token-mean"):
        cnt = m.sum(-1)
        seq = (L * m).sum(-1)
        if mode == "seq-mean-token-mean":
            seq = seq / (cnt + 1e-8)
        smask = (cnt > 0).double()
        n = gseq if gseq else smask.sum()
        if float(n) == 0:
            return (L * 0).sum()
        return (seq * smask).sum() / n
    if mode == "seq-mean-token-sum-norm":
        n = normlen if normlen else m.shape[-1]
        return (L * m).sum(-1).sum() / n
    raise ValueError(mode)


def policy_loss(logp, old, adv, m, cl, ch, c, mode, gtok=0, gseq=0, normlen=0):
    l = torch.clamp(logp - old, -20.0, 20.0)
    rho = torch.exp(l)
    ppo_kl = masked_mean(-l, m)
    L1 = -adv * rho
    L2 = -adv * torch.clamp(rho, 1 - cl, 1 + ch)
    Lc = torch.maximum(L1, L2)
    clipfrac = masked_mean(torch.gt(L2, L1).double(), m)
    L3 = -adv * c
    Ld = torch.min(L3, Lc)
    lower = masked_mean(torch.gt(Lc, L3).double() * (adv < 0).double(), m)
    L = torch.where(adv < 0, Ld, Lc)
    return agg(L, m, mode, gtok, gseq, normlen), ppo_kl, clipfrac, lower


def kl_forward(logp, ref, kind):
    if kind in ("kl", "k1"):
        return logp - ref
    if kind == "abs":
        return (logp - ref).abs()
    if kind in ("mse", "k2"):
        return 0.5 * (logp - ref).square()
    if kind in ("low_var_kl", "k3"):
        x = torch.clamp(ref - logp, min=-20, max=20)
        k = torch.exp(x) - x - 1
        return torch.clamp(k, min=-10, max=10)
    raise ValueError(kind)


def kl_penalty(logp, ref, kind):
    if not kind.endswith("+"):
        return kl_forward(logp, ref, kind)
    fwd = kl_forward(logp, ref, kind[:-1])
    bwd = 0.5 * (logp - ref).square()
    return bwd - bwd.detach() + fwd.detach()


def value_loss(v, old, ret, m, clip, mode, gtok=0, gseq=0):
    vc = torch.clamp(v, old - clip, old + clip)
    l1 = (v - ret) ** 2
    l2 = (vc - ret) ** 2
    L = torch.max(l1, l2)
    loss = 0.5 * agg(L, m, mode, gtok, gseq)
    clipfrac = masked_mean(torch.gt(l2, l1).double(), m)
    return loss, clipfrac


# ---------------------------------------------------------------- cases

def holes_mask(B, T, empty_rows=(), holes=True):
    """Right-padded responses of random length with tool-token holes inside."""
    m = np.zeros((B, T), dtype=np.float32)
    for b in range(B):
        if b in empty_rows:
            continue
        n = int(RNG.integers(2, T + 1))
        m[b, :n] = 1
        if holes and n > 4:
            s = int(RNG.integers(1, n - 2))
            m[b, s:s + 2] = 0  # a tool observation inside the response
    return m


def last_token_rewards(scores, m):
    B, T = m.shape
    r = np.zeros((B, T), dtype=np.float32)
    for b in range(B):
        idx = np.nonzero(m[b])[0]
        r[b, idx[-1] if len(idx) else 0] = scores[b]
    return r


def advantages_cases():
    out = {"grpo": [], "gae": [], "rpp": []}
    # GRPO
    B, T = 9, 7
    m = holes_mask(B, T, empty_rows=(4,))
    groups = ["a", "a", "a", "a", "b", "c", "c", "c", "d"]
    # group b: single member; group c: all equal; group d: single
    scores = np.array([1.0, 0.0, 0.5, 1.0, 0.25, 1.0, 1.0, 1.0, -0.5], dtype=np.float32)
    r = last_token_rewards(scores, m)
    r[0, 1] += np.float32(-0.125)  # a per-token term besides the score
    for norm in (True, False):
        a, ret = grpo(t64(r), t64(m), groups, norm)
        out["grpo"].append(dict(name=f"groups-norm={norm}", B=B, T=T, rewards=f32(r), mask=f32(m),
                                groups=groups, norm=norm, adv=a.reshape(-1).tolist(), returns=ret.reshape(-1).tolist()))
    B, T = 8, 5
    m = holes_mask(B, T)
    groups = [f"g{i // 4}" for i in range(B)]
    r = last_token_rewards(rand(B, 0, 1), m)
    a, ret = grpo(t64(r), t64(m), groups, True)
    out["grpo"].append(dict(name="random", B=B, T=T, rewards=f32(r), mask=f32(m), groups=groups, norm=True,
                            adv=a.reshape(-1).tolist(), returns=ret.reshape(-1).tolist()))
    # GAE
    for name, B, T, empty, gamma, lam in [("holes", 4, 9, (), 1.0, 1.0), ("holes-discount", 5, 8, (2,), 0.99, 0.95),
                                          ("no-holes", 3, 6, (), 0.9, 0.8)]:
        m = holes_mask(B, T, empty_rows=empty, holes=name != "no-holes")
        r = last_token_rewards(rand(B), m) + rand((B, T), -0.05, 0.05) * m
        r = r.astype(np.float32)
        v = rand((B, T))
        a, ret = gae(t64(r), t64(v), t64(m), gamma, lam)
        out["gae"].append(dict(name=name, B=B, T=T, rewards=f32(r), values=f32(v), mask=f32(m), gamma=gamma, lam=lam,
                               adv=a.reshape(-1).tolist(), returns=ret.reshape(-1).tolist()))
    # REINFORCE++
    for name, B, T, empty, gamma in [("holes", 4, 8, (1,), 1.0), ("discount", 3, 7, (), 0.9)]:
        m = holes_mask(B, T, empty_rows=empty)
        r = (last_token_rewards(rand(B), m) + rand((B, T), -0.05, 0.05) * m).astype(np.float32)
        a, ret = rpp(t64(r), t64(m), gamma)
        out["rpp"].append(dict(name=name, B=B, T=T, rewards=f32(r), mask=f32(m), gamma=gamma,
                               adv=a.reshape(-1).tolist(), returns=ret.reshape(-1).tolist()))
    # the other group estimators, on one batch: groups of 3, 2, 1 (not for pass@k), holes, an
    # empty row, a zero score (GPG counts non-zero scores)
    B, T = 8, 6
    m = holes_mask(B, T, empty_rows=(4,))
    groups = ["a", "a", "a", "b", "b", "c", "c", "d"]
    scores = np.array([1.0, 0.0, 0.75, 0.5, 0.125, 0.0, -1.0, 0.25], dtype=np.float32)
    r = last_token_rewards(scores, m)
    r[1, 0] += np.float32(0.0625)
    for name, fn in (("rppb", lambda: rpp_baseline(t64(r), t64(m), groups)), ("rloo", lambda: rloo(t64(r), t64(m), groups)),
                     ("opo", lambda: opo(t64(r), t64(m), groups)), ("gpg", lambda: gpg(t64(r), t64(m), groups))):
        a, ret = fn()
        out.setdefault("group", []).append(dict(estimator=name, B=B, T=T, rewards=f32(r), mask=f32(m), groups=groups,
                                                adv=a.reshape(-1).tolist(), returns=ret.reshape(-1).tolist()))
    pgroups = groups[:7]
    pr, pm = r[:7], m[:7]
    for norm in (True, False):
        a, ret = grpo_passk(t64(pr), t64(pm), pgroups, norm)
        out.setdefault("passk", []).append(dict(B=7, T=T, rewards=f32(pr), mask=f32(pm), groups=pgroups, norm=norm,
                                                adv=a.reshape(-1).tolist(), returns=ret.reshape(-1).tolist()))
    return out


def agg_cases():
    out = []
    B, T = 5, 6
    m = holes_mask(B, T, empty_rows=(3,))
    L = rand((B, T), -2, 2)
    for mode in ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"):
        for gtok, gseq in ((0, 0), (37, 9)):
            x = t64(L).requires_grad_(True)
            loss = agg(x, t64(m), mode, gtok, gseq)
            loss.backward()
            out.append(dict(name=f"{mode}-g{gtok}-{gseq}", B=B, T=T, loss_mat=f32(L), mask=f32(m), mode=mode,
                            global_tokens=gtok, global_seqs=gseq, loss=loss.item(), grad=x.grad.reshape(-1).tolist()))
    return out


def policy_cases():
    out = []
    specs = [
        # name, B, T, clip_low, clip_high, c, mode, gtok, gseq, spread
        ("token-mean", 4, 8, 0.2, 0.2, 3.0, "token-mean", 0, 0, 0.6),
        ("clip-higher", 4, 8, 0.2, 0.28, 3.0, "token-mean", 0, 0, 0.6),
        ("seq-mean-token-sum", 4, 8, 0.2, 0.2, 3.0, "seq-mean-token-sum", 0, 0, 0.6),
        ("seq-mean-token-mean", 4, 8, 0.1, 0.3, 3.0, "seq-mean-token-mean", 0, 0, 0.6),
        ("seq-mean-token-sum-norm", 4, 8, 0.2, 0.2, 3.0, "seq-mean-token-sum-norm", 0, 0, 0.6),
        ("global-token-mean", 3, 6, 0.2, 0.2, 3.0, "token-mean", 40, 0, 0.6),
        ("global-seq-mean", 3, 6, 0.2, 0.2, 3.0, "seq-mean-token-mean", 0, 7, 0.6),
        ("dual-clip", 6, 6, 0.2, 0.2, 2.0, "token-mean", 0, 0, 2.0),
        ("ratio-clamp-20", 2, 5, 0.2, 0.2, 3.0, "token-mean", 0, 0, 30.0),
    ]
    for name, B, T, cl, ch, c, mode, gtok, gseq, spread in specs:
        m = holes_mask(B, T, empty_rows=(1,) if B > 3 else ())
        old = rand((B, T), -4, -0.1)
        logp = (old + rand((B, T), -spread, spread)).astype(np.float32)
        adv = rand((B, T), -2, 2)
        if name == "dual-clip":
            adv = -np.abs(adv).astype(np.float32) - np.float32(0.1)
        x = t64(logp).requires_grad_(True)
        loss, kl, cf, cfl = policy_loss(x, t64(old), t64(adv), t64(m), cl, ch, c, mode, gtok, gseq)
        loss.backward()
        out.append(dict(name=name, B=B, T=T, logp=f32(logp), old_logp=f32(old), adv=f32(adv), mask=f32(m),
                        clip_low=cl, clip_high=ch, clip_c=c, mode=mode, global_tokens=gtok, global_seqs=gseq,
                        loss=loss.item(), dlogp=x.grad.reshape(-1).tolist(), ppo_kl=kl.item(), clipfrac=cf.item(),
                        clipfrac_lower=cfl.item()))
    return out


def kl_cases():
    out = []
    n = 24
    ref = rand(n, -5, -0.1)
    d = rand(n, -1.5, 1.5)
    d[0], d[1], d[2] = -25.0, 25.0, -3.5  # x clamp at 20; k3 clamp at 10 (exp(3.5)-4.5 > 10)
    d[3] = 0.0  # |d| at 0
    logp = (ref + d).astype(np.float32)
    for kind in ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "kl+", "k1+", "abs+", "low_var_kl+", "k3+"):
        x = t64(logp).requires_grad_(True)
        k = kl_penalty(x, t64(ref), kind)
        k.sum().backward()
        out.append(dict(kind=kind, logp=f32(logp), ref_logp=f32(ref), kl=k.detach().tolist(), dlogp=x.grad.tolist()))
    return out


def apply_kl_cases():
    out = []
    B, T = 4, 6
    m = holes_mask(B, T, empty_rows=(2,))
    r = last_token_rewards(rand(B), m)
    ref = rand((B, T), -4, -0.1)
    old = (ref + rand((B, T), -0.5, 0.5)).astype(np.float32)
    for kind, beta in (("kl", 0.05), ("low_var_kl", 0.2), ("abs", 0.001)):
        kld = kl_penalty(t64(old), t64(ref), kind) * t64(m)
        rew = t64(r) - beta * kld
        per_seq = (kld * t64(m)).sum(-1) / (t64(m).sum(-1) + 1e-8)
        out.append(dict(kind=kind, beta=beta, B=B, T=T, rewards_in=f32(r), logp=f32(old), ref_logp=f32(ref),
                        mask=f32(m), rewards=rew.reshape(-1).tolist(), mean_kl=per_seq.mean().item()))
    return out


def kl_ctrl_cases():
    """The adaptive controller over a sequence of measured KLs."""
    out = []
    for init, target, horizon, n, kls in ((0.001, 0.1, 10000, 256, [0.05, 0.2, 0.11, 0.3, 0.0, 0.1, 0.09, 1.5]),
                                          (0.2, 6.0, 100, 8, [12.0, 3.0, 6.6, 5.5, 0.1])):
        beta, traj = init, []
        for kl in kls:
            e = float(np.clip(kl / target - 1, -0.2, 0.2))
            beta *= 1 + e * n / horizon
            traj.append(beta)
        out.append(dict(init=init, target=target, horizon=horizon, n_steps=n, kls=kls, betas=traj))
    return out


VALUE_CASES = (("token-mean", 4, 7, 0.2, "token-mean", 0, 0),
               ("seq-mean-token-mean", 4, 7, 0.5, "seq-mean-token-mean", 0, 0),
               ("global", 3, 5, 0.2, "token-mean", 30, 0))
# drawn after every other file's cases, so adding them left the other goldens unchanged
VALUE_CASES_MORE = (("seq-mean-token-sum", 4, 6, 0.3, "seq-mean-token-sum", 0, 0),
                    ("seq-mean-token-sum-norm", 3, 6, 0.3, "seq-mean-token-sum-norm", 0, 0),
                    ("global-seq-mean-token-mean", 3, 5, 0.5, "seq-mean-token-mean", 0, 7))


def value_cases(cases=VALUE_CASES):
    out = []
    for name, B, T, clip, mode, gtok, gseq in cases:
        m = holes_mask(B, T, empty_rows=(2,) if B > 3 else ())
        old = rand((B, T))
        v = (old + rand((B, T), -3 * clip, 3 * clip)).astype(np.float32)
        ret = rand((B, T), -1.5, 1.5)
        x = t64(v).requires_grad_(True)
        loss, cf = value_loss(x, t64(old), t64(ret), t64(m), clip, mode, gtok, gseq)
        loss.backward()
        out.append(dict(name=name, B=B, T=T, values=f32(v), old_values=f32(old), returns=f32(ret), mask=f32(m),
                        clip=clip, mode=mode, global_tokens=gtok, global_seqs=gseq, loss=loss.item(),
                        dvalues=x.grad.reshape(-1).tolist(), clipfrac=cf.item()))
    return out


def plain_keys(x):
    """snake_case keys -> lower case without underscores (Go's encoding/json matches them to
    the exported field names case-insensitively)."""
    if isinstance(x, dict):
        return {k.replace("_", ""): plain_keys(v) for k, v in x.items()}
    if isinstance(x, list):
        return [plain_keys(v) for v in x]
    return x


def actor_cases():
    """pg_loss - entropy_coeff*agg(H) + kl_loss_coef*agg(kl): gradients for logp and entropy."""
    out = []
    for name, mode, ent_coef, use_kl, kl_type, kl_coef in (
            ("pg+entropy+kl", "token-mean", 0.01, True, "low_var_kl", 0.001),
            ("pg+kl-seq", "seq-mean-token-mean", 0.0, True, "mse", 0.1),
            ("pg+entropy", "seq-mean-token-sum-norm", 0.05, False, "low_var_kl", 0.0)):
        B, T = 4, 6
        m = holes_mask(B, T, empty_rows=(2,))
        old = rand((B, T), -3, -0.1)
        logp = (old + rand((B, T), -0.5, 0.5)).astype(np.float32)
        ref = (old + rand((B, T), -0.5, 0.5)).astype(np.float32)
        ent = rand((B, T), 0.1, 3)
        adv = rand((B, T), -2, 2)
        x = t64(logp).requires_grad_(True)
        h = t64(ent).requires_grad_(True)
        pg, kl, cf, cfl = policy_loss(x, t64(old), t64(adv), t64(m), 0.2, 0.28, 3.0, mode)
        h_agg = agg(h, t64(m), mode)
        loss = pg - ent_coef * h_agg
        kl_agg = torch.tensor(0.0)
        if use_kl:
            kl_agg = agg(kl_penalty(x, t64(ref), kl_type), t64(m), mode)
            loss = loss + kl_coef * kl_agg
        loss.backward()
        out.append(dict(name=name, B=B, T=T, logp=f32(logp), entropy=f32(ent), old_logp=f32(old), ref_logp=f32(ref),
                        adv=f32(adv), mask=f32(m), mode=mode, entropy_coeff=ent_coef, use_kl_loss=use_kl,
                        kl_loss_type=kl_type, kl_loss_coef=kl_coef, loss=loss.item(), pg_loss=pg.item(),
                        entropy_agg=h_agg.item(), kl_loss=kl_agg.item(), dlogp=x.grad.reshape(-1).tolist(),
                        dentropy=h.grad.reshape(-1).tolist()))
    return out


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "host/algo/testdata"
    os.makedirs(outdir, exist_ok=True)
    files = {
        "advantages.json": advantages_cases(),
        "agg.json": agg_cases(),
        "policy_loss.json": policy_cases(),
        "kl.json": {"penalty": kl_cases(), "apply": apply_kl_cases(), "adaptive": kl_ctrl_cases()},
        "value_loss.json": value_cases(),
        "actor_loss.json": actor_cases(),
    }
    files["value_loss.json"] += value_cases(VALUE_CASES_MORE)
    for name, data in files.items():
        with open(os.path.join(outdir, name), "w") as f:
            json.dump(plain_keys(data), f, indent=None, separators=(",", ":"))
            f.write("\n")
        print("wrote", os.path.join(outdir, name))


if __name__ == "__main__":
    main()
