"""Batched L2 logistic regression in torch: many probes that share one feature matrix, fitted at once.

    from probes.fit.solver import Design, solve
    design = Design.build(X, train_masks, device="cpu")    # X [n, d]; one StandardScaler per mask
    theta, info = solve(design, targets, mask_idx, Cs, n_classes=2)

Every problem ``b`` is scikit-learn's ``Pipeline(StandardScaler(), LogisticRegression(C=C_b, solver="lbfgs"))``
fitted on the rows where ``train_masks[mask_idx[b]]`` is set, with the labels ``targets[b]``. The objective
is scikit-learn's own scaling (since 1.2):

    f_b(W, c) = (1 / n_b) * sum_{i in train_b} CE(z_i, y_bi) + ||W||^2 / (2 * C_b * n_b),
    z_i = ((x_i - mu_b) / sigma_b) @ W^T + c                  (intercept unpenalised)

binary problems use one weight vector and the logistic loss; K > 2 classes the full multinomial (K vectors).
It is convex, so a solver that meets scikit-learn's stopping rule (max |gradient| <= tol) lands on the same
optimum. All problems' logits come from one matrix product ``X @ V`` ([n, d] x [d, B*K]) and all gradients
from one ``X^T R``, so the cost of B problems is two GEMMs per iteration instead of 2B matrix-vector products.

The optimiser is L-BFGS (history ``m``), batched: per-problem two-loop recursion, per-problem backtracking
line search with an Armijo test tolerant of float32 round-off, and per-problem stopping (converged problems
leave the batch). Warm starts (``theta0``) make a C path cheap. The features are centred once on their global
mean before the GEMMs (standardisation does not change under a shift), so float32 does not lose precision on
residual-stream dimensions with large offsets. Works on any torch device (CPU, CUDA).
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch

_PRECOND: dict = {}  # the last feature matrix's eigenbasis (one layer is fitted many times in a row)
SMALL_WORK = 4_000_000  # n * d below which one thread is faster (per-op overhead beats the parallel speed-up)


def unique_rows(masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(masks, axis=0, return_inverse=True)`` for a bool matrix ``[M, n]``, sorting the rows packed 8
    to a byte (big-endian bits keep the lexicographic order, so the unique rows, their order and the inverse are
    the same): thousands of permutation masks of a large study sort in a fraction of the time."""
    m = np.asarray(masks, dtype=bool)
    if m.ndim != 2 or m.shape[1] == 0:
        u, inv = np.unique(m, axis=0, return_inverse=True)
        return u, np.asarray(inv).reshape(-1)
    up, inv = np.unique(np.packbits(m, axis=1), axis=0, return_inverse=True)
    return np.unpackbits(up, axis=1, count=m.shape[1]).astype(bool), np.asarray(inv).reshape(-1)


@contextmanager
def thread_limit(n: int, d: int, device: torch.device | str = "cpu") -> Iterator[None]:
    """One intra-op torch thread for small CPU problems (thread hand-offs dominate them); unchanged otherwise."""
    if torch.device(device).type != "cpu" or n * d >= SMALL_WORK:
        yield
        return
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def resolve_device(device: str = "auto") -> torch.device:
    """``cpu``, ``cuda``, ``cuda:N``, ``mps`` or ``auto`` (CUDA if available, else CPU); unknown -> ValueError
    with a one-line message listing what this machine has."""
    avail = ["cpu"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        avail.append("mps")
    spec = (device or "auto").strip().lower()
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if spec == "cuda" and torch.cuda.is_available():
        return torch.device("cuda")
    if spec in avail:
        return torch.device(spec)
    raise ValueError(f"unknown or unavailable --device {device!r}; available here: auto, {', '.join(avail)}"
                     + ("" if torch.cuda.is_available() else " (no CUDA device visible)"))


@dataclass
class Design:
    """Shared features and one standardisation per training mask."""

    X: torch.Tensor  # [n, d] features minus their global mean
    masks: torch.Tensor  # [M, n] float 0/1 training rows
    mu: torch.Tensor  # [M, d] scaler mean (of the centred X) over the stat mask's rows
    sigma: torch.Tensor  # [M, d] scaler population std (1 where 0, as StandardScaler)
    n_train: torch.Tensor  # [M]
    shift: torch.Tensor  # [d] the global mean removed from X (float64)
    evecs: torch.Tensor | None = None  # [d, d] eigenvectors of the all-rows feature correlation matrix
    evals: torch.Tensor | None = None  # [d] its eigenvalues (the preconditioner, see precondition())

    @classmethod
    def build(cls, X: np.ndarray | torch.Tensor, masks: np.ndarray, *, stat_masks: np.ndarray | None = None,
              device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32,
              precondition: bool = True) -> Design:
        """``masks[i]`` the training rows of problems with mask index i; ``stat_masks[i]`` (default
        ``masks[i]``) the rows its StandardScaler was fitted on (an inner split of an outer training fold is
        scaled with the outer fold's scaler, as inside a fitted Pipeline)."""
        dev = torch.device(device)
        Xt = torch.as_tensor(np.asarray(X) if not isinstance(X, torch.Tensor) else X)
        shift = Xt.double().mean(0)
        Xc = (Xt.double() - shift).to(device=dev, dtype=dtype)  # [n, d]
        M = torch.as_tensor(np.asarray(masks, dtype=np.float64)).to(dev)  # [M, n]
        nt = M.sum(1)
        # the scaler moments once per distinct stat mask (the permutation refits' inner splits share their
        # outer fold's scaler: a few distinct masks among thousands), expanded to every mask
        sm_np = np.asarray(masks if stat_masks is None else stat_masks, dtype=bool)
        uS, inv = unique_rows(sm_np)
        SM = torch.as_tensor(uS.astype(np.float64)).to(dev)  # [U, n]
        ns = SM.sum(1)
        if torch.any(nt < 1) or torch.any(ns < 1):
            raise ValueError("a training mask selects no rows")
        Xd = Xc.double()
        mu_u = (SM @ Xd) / ns[:, None]  # [U, d]
        var = (SM @ (Xd * Xd)) / ns[:, None] - mu_u * mu_u
        sig_u = var.clamp_min(0).sqrt()
        sig_u = torch.where(sig_u < 10 * torch.finfo(torch.float64).eps * (1 + mu_u.abs()), torch.ones_like(sig_u), sig_u)
        idx = torch.as_tensor(np.asarray(inv).reshape(-1), device=dev)
        mu, sig = mu_u[idx], sig_u[idx]  # [M, d]
        evecs = evals = None
        hit = _PRECOND.get("x")
        if precondition and hit is not None and hit is X and _PRECOND.get("key") == (str(dev), dtype):
            evals, evecs = _PRECOND["value"]  # same feature matrix as the last build: reuse its eigenbasis
        elif precondition:
            # correlation of the standardised features over all rows: the logistic Hessian at w = 0 is
            # R * p(1 - p) + lambda I, so (R / 4 + lambda I)^-1 is a near-Newton first guess for every problem
            sd = Xd.std(0, unbiased=False)
            sd = torch.where(sd > 0, sd, torch.ones_like(sd)).to(dtype)
            Xs = Xc / sd
            R = (Xs.T @ Xs) / Xs.shape[0]  # [d, d]
            del Xs
            evals, evecs = torch.linalg.eigh(R.double() if R.shape[0] <= 1024 else R)
            evals, evecs = evals.to(dtype).clamp_min(0), evecs.to(dtype)
            _PRECOND.update(x=X, key=(str(dev), dtype), value=(evals, evecs))
        return cls(Xc, M.to(dtype), mu.to(dtype), sig.to(dtype), nt.to(dtype), shift, evecs, evals)

    def precondition(self, q: torch.Tensor, lam: torch.Tensor, h: float, quad: bool = False) -> torch.Tensor:
        """``H0 q`` for q [B, K, d+1]: ``(h R + lam_b I)^-1`` on the weights (R the feature correlation, h
        the curvature of the loss at 0), ``1 / h`` on the intercept; identity without a preconditioner. With
        ``quad``, ``q^T H0 q`` [B] (one GEMM, in the eigenbasis)."""
        if self.evecs is None or self.evals is None:
            return (q * q).sum((1, 2)) if quad else q
        B, K, _ = q.shape
        c = q[:, :, :-1].reshape(B * K, -1) @ self.evecs  # [B*K, d]
        den = h * self.evals[None, :] + lam.repeat_interleave(K)[:, None]
        if quad:
            return (c * c / den).view(B, -1).sum(1) + (q[:, :, -1] * q[:, :, -1]).sum(1) / h
        out = torch.empty_like(q)
        out[:, :, :-1] = ((c / den) @ self.evecs.T).view(B, K, -1)
        out[:, :, -1] = q[:, :, -1] / h
        return out

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def d(self) -> int:
        return int(self.X.shape[1])

    def logits(self, theta: torch.Tensor, mask_idx: torch.Tensor) -> torch.Tensor:
        """[n, B, K] logits of every row for problems ``theta`` [B, K, d+1] standardised by ``mask_idx`` (a view of
        :meth:`logits_bkn`)."""
        return self.logits_bkn(theta, mask_idx).permute(2, 0, 1)

    def logits_bkn(self, theta: torch.Tensor, mask_idx: torch.Tensor) -> torch.Tensor:
        """The logits as ``[B, K, n]``: one GEMM ``V X^T`` whose rows are problems, so the loss's elementwise
        work runs over contiguous rows (the training masks and targets are stored that way)."""
        B, K, _ = theta.shape
        V = theta[:, :, :-1] / self.sigma[mask_idx][:, None, :]  # [B, K, d] raw-space weights
        off = theta[:, :, -1] - torch.einsum("bkd,bd->bk", V, self.mu[mask_idx])  # [B, K]
        Z = (V.reshape(B * K, -1) @ self.X.T).view(B, K, -1)  # [B, K, n]
        return Z.add_(off[:, :, None])

    def raw_coef(self, theta: torch.Tensor, mask_idx: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """Weights and intercepts in the caller's raw coordinates: ``z = x @ W.T + b`` (float64 numpy)."""
        th = theta.double()
        V = th[:, :, :-1] / self.sigma[mask_idx].double()[:, None, :]
        mu_raw = self.mu[mask_idx].double() + self.shift.to(th.device)[None]
        b = th[:, :, -1] - torch.einsum("bkd,bd->bk", V, mu_raw)
        return V.cpu().numpy(), b.cpu().numpy()


@dataclass
class SolveState:
    """The data part of the objective at a solution, and every row's logits there (:func:`solve_with_state`,
    :func:`state_at`). A C path reads its held-out predictions from ``logits`` and passes the state as ``start``
    to the next C (the same problems in the same order, ``theta0`` this solution): only the L2 term depends on C,
    so the next solve takes the very steps it would take after evaluating the objective itself."""

    data_loss: torch.Tensor  # [B] mean cross-entropy over each problem's training rows
    data_grad: torch.Tensor  # [B, K, d+1] its gradient (intercept last)
    zb: torch.Tensor  # [B, K, n] every row's logits (design.logits_bkn of the solution)

    @property
    def logits(self) -> torch.Tensor:
        """[n, B, K] every row's logits (a view, as :meth:`Design.logits`)."""
        return self.zb.permute(2, 0, 1)


@dataclass
class SolveInfo:
    n_iter: np.ndarray  # [B]
    converged: np.ndarray  # [B] bool: max |grad| <= tol
    max_grad: np.ndarray  # [B]


def _penalised(theta: torch.Tensor, C: torch.Tensor, nb: torch.Tensor, data_loss: torch.Tensor,
               data_grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The objective and gradient from their data part: ``+ ||W||^2 / (2 C n_b)`` and its gradient on the
    weights (the intercept is unpenalised)."""
    W = theta[:, :, :-1]
    loss = data_loss + (W * W).sum((1, 2)) / (2 * C * nb)
    g = data_grad.clone()
    g[:, :, :-1] = data_grad[:, :, :-1] + W / (C * nb)[:, None, None]
    return loss, g


def _loss_grad_parts(design: Design, theta: torch.Tensor, T: torch.Tensor, mask_idx: torch.Tensor, C: torch.Tensor,
                     binary: bool, zero: bool = False) -> tuple[torch.Tensor, torch.Tensor, SolveState]:
    """Objective [B], gradient [B, K, d+1] (see the module docstring) and its data part (:class:`SolveState`).
    ``T``: binary [B, n] 0/1, multinomial [B, K, n] one-hot (:func:`_targets`). ``zero``: ``theta`` is all zeros,
    so every logit is 0 exactly and the forward GEMM is skipped."""
    B, K = theta.shape[:2]
    Z = (torch.zeros(B, K, design.n, device=theta.device, dtype=theta.dtype) if zero
         else design.logits_bkn(theta, mask_idx))  # [B, K, n]
    nb = design.n_train[mask_idx]  # [B]
    w = design.masks[mask_idx] / nb[:, None]  # [B, n] training rows, each weighing 1 / n_b
    if binary:
        z = Z[:, 0, :]
        ce = torch.nn.functional.binary_cross_entropy_with_logits(z, T, reduction="none")  # softplus(z) - t z
        R = torch.sigmoid(z).sub_(T).mul_(w)[:, None, :]  # [B, 1, n]
    else:
        ce = torch.logsumexp(Z, dim=1) - (T * Z).sum(1)  # [B, n]
        R = torch.softmax(Z, dim=1).sub_(T).mul_(w[:, None, :])  # [B, K, n]
    data_loss = (ce * w).sum(1)
    G = (R.reshape(B * K, -1) @ design.X).view(B, K, -1)  # [B, K, d]  R X
    sR = R.sum(2)  # [B, K]
    sig = design.sigma[mask_idx][:, None, :]
    data_grad = torch.cat([(G - sR[:, :, None] * design.mu[mask_idx][:, None, :]) / sig, sR[:, :, None]], dim=2)
    loss, grad = _penalised(theta, C, nb, data_loss, data_grad)
    return loss, grad, SolveState(data_loss, data_grad, Z)


def _targets(y: torch.Tensor, n_classes: int, dt: torch.dtype) -> torch.Tensor:
    """Class indices [B, n] as the loss reads them: binary [B, n] 0/1, multinomial one-hot [B, K, n]."""
    if n_classes == 2:
        return y.to(dt)
    return torch.nn.functional.one_hot(y.clamp_min(0), n_classes).to(dt).permute(0, 2, 1).contiguous()


def state_at(design: Design, theta: torch.Tensor, targets: np.ndarray | torch.Tensor,
             mask_idx: np.ndarray | torch.Tensor | Sequence[int], *, n_classes: int, grad: bool = True) -> SolveState:
    """The :class:`SolveState` of problems ``theta`` (one evaluation over the whole batch, as :func:`solve`'s
    first one); ``grad=False`` computes the logits only (the last C of a path: no next solve reads it)."""
    dev, dt = design.X.device, design.X.dtype
    midx = torch.as_tensor(np.asarray(mask_idx)).to(dev).long()
    if not grad:
        Z = design.logits_bkn(theta, midx)
        return SolveState(torch.empty(0, device=dev, dtype=dt), torch.empty(0, device=dev, dtype=dt), Z)
    binary = n_classes == 2
    y = torch.as_tensor(np.asarray(targets) if not isinstance(targets, torch.Tensor) else targets).to(dev).long()
    T = _targets(y, n_classes, dt)
    C = torch.ones(len(midx), device=dev, dtype=dt)  # the data part does not depend on C
    with thread_limit(design.n, design.d, dev):
        return _loss_grad_parts(design, theta, T, midx, C, binary)[2]


def solve(design: Design, targets: np.ndarray | torch.Tensor, mask_idx: np.ndarray | torch.Tensor | Sequence[int],
          Cs: np.ndarray | torch.Tensor | Sequence[float], *, n_classes: int, theta0: torch.Tensor | None = None,
          tol: float = 1e-4, max_iter: int = 500, history: int = 10, start: SolveState | None = None
          ) -> tuple[torch.Tensor, SolveInfo]:
    """Fit B logistic problems; ``targets`` [B, n] class indices (only training rows matter), ``mask_idx`` [B]
    (which training mask / standardisation), ``Cs`` [B]. Returns ``theta`` [B, K, d+1] (standardised
    coordinates, last column the intercept; K = 1 for two classes) and per-problem iteration counts. With
    ``theta0``, ``start`` may be the :class:`SolveState` of ``theta0`` for the same problems (a warm start along
    a C path): it replaces the first evaluation, so the iterates are the same as without it."""
    theta, info, _ = solve_with_state(design, targets, mask_idx, Cs, n_classes=n_classes, theta0=theta0, tol=tol,
                                      max_iter=max_iter, history=history, start=start)
    return theta, info


def solve_with_state(design: Design, targets: np.ndarray | torch.Tensor,
                     mask_idx: np.ndarray | torch.Tensor | Sequence[int], Cs: np.ndarray | torch.Tensor | Sequence[float],
                     *, n_classes: int, theta0: torch.Tensor | None = None, tol: float = 1e-4, max_iter: int = 500,
                     history: int = 10, start: SolveState | None = None
                     ) -> tuple[torch.Tensor, SolveInfo, SolveState]:
    """:func:`solve`, and the :class:`SolveState` at the solution, kept from the evaluation that accepted each
    problem's last step (no evaluation more: a C path reads its held-out logits from it and passes it as the
    next C's ``start``)."""
    with thread_limit(design.n, design.d, design.X.device):
        return _solve(design, targets, mask_idx, Cs, n_classes=n_classes, theta0=theta0, tol=tol,
                      max_iter=max_iter, history=history, start=start)


def _solve(design: Design, targets: np.ndarray | torch.Tensor, mask_idx: np.ndarray | torch.Tensor | Sequence[int],
           Cs: np.ndarray | torch.Tensor | Sequence[float], *, n_classes: int, theta0: torch.Tensor | None = None,
           tol: float = 1e-4, max_iter: int = 500, history: int = 10, start: SolveState | None = None
           ) -> tuple[torch.Tensor, SolveInfo, SolveState]:
    """:func:`solve_with_state` (inside its thread limit)."""
    dev, dt = design.X.device, design.X.dtype
    binary = n_classes == 2
    K = 1 if binary else n_classes
    y = torch.as_tensor(np.asarray(targets) if not isinstance(targets, torch.Tensor) else targets).to(dev).long()
    B = y.shape[0]
    T = _targets(y, n_classes, dt)
    midx = torch.as_tensor(np.asarray(mask_idx)).to(dev).long()
    C = torch.as_tensor(np.asarray(Cs, dtype=np.float64)).to(device=dev, dtype=dt)
    theta = (torch.zeros(B, K, design.d + 1, device=dev, dtype=dt) if theta0 is None
             else theta0.detach().to(device=dev, dtype=dt).clone())
    P = K * (design.d + 1)
    S = torch.zeros(history, B, P, device=dev, dtype=dt)
    Y = torch.zeros(history, B, P, device=dev, dtype=dt)
    rho = torch.zeros(history, B, device=dev, dtype=dt)
    gamma = torch.ones(B, device=dev, dtype=dt)
    lam = 1.0 / (C * design.n_train[midx])  # L2 strength of the mean-scaled objective
    h0 = 0.25 if binary else (1.0 / n_classes) * (1.0 - 1.0 / n_classes)
    n_iter = torch.zeros(B, dtype=torch.long)
    done = torch.zeros(B, dtype=torch.bool, device=dev)
    if start is not None and theta0 is not None:
        if start.data_loss.shape[0] != B:
            raise ValueError(f"start holds {start.data_loss.shape[0]} problems, theta0 {B}")
        f, g = _penalised(theta, C, design.n_train[midx], start.data_loss, start.data_grad)
        state = SolveState(start.data_loss.clone(), start.data_grad.clone(), start.zb.clone())
    else:
        f, g, state = _loss_grad_parts(design, theta, T, midx, C, binary, zero=theta0 is None)
    g = g.reshape(B, P)
    gmax = g.abs().amax(1)
    done |= gmax <= tol
    eps32 = 1e-6 if dt == torch.float32 else 1e-12
    for it in range(max_iter):
        act = torch.nonzero(~done).flatten()
        if act.numel() == 0:
            break
        j = it % history
        # two-loop recursion on the active problems
        q = -g[act]
        alphas = []
        order = [(j - 1 - i) % history for i in range(min(it, history))]
        for h in order:
            a = rho[h, act] * (S[h, act] * q).sum(1)
            q = q - a[:, None] * Y[h, act]
            alphas.append(a)
        if design.evecs is not None:
            q = design.precondition(q.view(-1, K, design.d + 1), lam[act], h0).reshape(-1, P)
        q = q * gamma[act][:, None]
        for h, a in zip(reversed(order), reversed(alphas)):
            bta = rho[h, act] * (Y[h, act] * q).sum(1)
            q = q + (a - bta)[:, None] * S[h, act]
        p = q
        gp = (g[act] * p).sum(1)
        bad = gp >= 0  # not a descent direction: fall back to steepest descent
        if bad.any():
            p[bad] = -g[act][bad]
            gp = (g[act] * p).sum(1)
        if it == 0 and design.evecs is None:  # first step: scale to a unit-length move as scipy does
            step0 = torch.clamp(1.0 / p.norm(dim=1), max=1.0)
        else:
            step0 = torch.ones(act.numel(), device=dev, dtype=dt)
        t = step0.clone()
        th_a, f_a, g_a = theta[act], f[act], g[act]
        new_th = th_a.clone()
        new_f = f_a.clone()
        new_g = g_a.clone()
        pending = torch.arange(act.numel(), device=dev)
        for _ in range(30):
            cand = th_a[pending] + (t[pending][:, None] * p[pending]).view(-1, K, design.d + 1)
            fc, gc, sc = _loss_grad_parts(design, cand, T[act[pending]], midx[act[pending]], C[act[pending]], binary)
            ok = fc <= f_a[pending] + 1e-4 * t[pending] * gp[pending] + eps32 * f_a[pending].abs()
            ok &= torch.isfinite(fc)
            acc = pending[ok]
            new_th[acc], new_f[acc], new_g[acc] = cand[ok], fc[ok], gc.reshape(-1, P)[ok]
            kept = act[acc]  # the accepted problems' state at their new point, from this very evaluation
            state.data_loss[kept], state.data_grad[kept], state.zb[kept] = sc.data_loss[ok], sc.data_grad[ok], sc.zb[ok]
            pending = pending[~ok]
            if pending.numel() == 0:
                break
            t[pending] = t[pending] * 0.5
        stalled = torch.zeros(act.numel(), dtype=torch.bool, device=dev)
        stalled[pending] = True  # line search failed: at the precision limit; stop these problems
        s = (new_th - th_a).reshape(-1, P)
        yv = new_g - g_a
        sy = (s * yv).sum(1)
        valid = sy > 1e-10 * (s.norm(dim=1) * yv.norm(dim=1)).clamp_min(1e-30)
        S[j, act] = s
        Y[j, act] = yv
        rho[j, act] = torch.where(valid, 1.0 / sy.clamp_min(1e-30), torch.zeros_like(sy))
        yy = design.precondition(yv.view(-1, K, design.d + 1), lam[act], h0, quad=True)  # the curvature along the step
        gamma[act] = torch.where(valid, sy / yy.clamp_min(1e-30), gamma[act])
        theta[act], f[act], g[act] = new_th, new_f, new_g
        n_iter[act.cpu()] += 1
        gm = new_g.abs().amax(1)
        gmax[act] = gm
        done[act] = (gm <= tol) | stalled
    info = SolveInfo(n_iter=n_iter.numpy(), converged=(gmax <= tol).cpu().numpy(), max_grad=gmax.cpu().numpy())
    return theta, info, state
