"""Times, on one GPU, the passes Megatron-Core's local (non-Transformer-Engine) layer spec runs
outside its GEMMs, rebuilt in plain PyTorch op for op as the Megatron-Core 0.19.2 modules issue
them (DotProductAttention with the causal mask and torch softmax, torch RMSNorm, unfused RoPE,
the unfused vocab-parallel cross-entropy, torch's foreach AdamW and the mixed-precision
optimizer's copies), forward and backward, and prints each one's milliseconds and the bytes per
element the estimator's non-TE model counts for it, so the effective bandwidth can be read off.

    python3 unfused_kernels.py [--out FILE]

Shapes are the measured grid's base (Llama-3-style: hidden 2048, FFN 8192, 16 heads, 8 KV
groups, sequence 2048, micro batch 1, vocabulary 128256), plus 32 heads and sequence 4096.
"""
import argparse
import json
import math

import torch

dev = "cuda"
bf16 = torch.bfloat16


def timed(fn, iters=10, warm=3):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(iters):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / iters


def core_attention(s, b, a, g, d):
    """DotProductAttention.forward + backward, causal, bf16, dropout 0, scale in baddbmm."""
    q = torch.randn(s, b, a, d, device=dev, dtype=bf16, requires_grad=True)
    k = torch.randn(s, b, g, d, device=dev, dtype=bf16, requires_grad=True)
    v = torch.randn(s, b, g, d, device=dev, dtype=bf16, requires_grad=True)
    mask = torch.triu(torch.ones(s, s, device=dev), diagonal=1).bool()
    go = torch.randn(s, b, a * d, device=dev, dtype=bf16)

    def run(backward=True):
        kk = k.repeat_interleave(a // g, dim=2) if a > g else k
        vv = v.repeat_interleave(a // g, dim=2) if a > g else v
        qq = q.reshape(s, b * a, -1)
        kk = kk.view(s, b * a, -1)
        buf = torch.empty(b * a, s, s, device=dev, dtype=bf16)
        sc = torch.baddbmm(buf, qq.transpose(0, 1), kk.transpose(0, 1).transpose(1, 2), beta=0.0, alpha=1 / math.sqrt(d))
        sc = sc.view(b, a, s, s)
        sc.masked_fill_(mask, -10000.0)
        p = torch.nn.functional.softmax(sc, dim=-1)
        p = torch.nn.functional.dropout(p, 0.0, training=True)
        vv = vv.view(s, b * a, -1)
        ctx = torch.bmm(p.view(b * a, s, s), vv.transpose(0, 1))
        ctx = ctx.view(b, a, s, d).permute(2, 0, 1, 3).contiguous().view(s, b, a * d)
        if backward:
            ctx.backward(go)

    full = timed(run)
    fwd = timed(lambda: run(False))
    gemm_flops = 2 * 2 * b * a * s * s * d  # QK^T and PV, full matrix, forward
    return {"fwd_bwd_ms": full, "fwd_ms": fwd, "score_elems": b * a * s * s, "gemm_flops_fwd": gemm_flops}


def flash(s, b, a, g, d):
    q = torch.randn(b, a, s, d, device=dev, dtype=bf16, requires_grad=True)
    k = torch.randn(b, a, s, d, device=dev, dtype=bf16, requires_grad=True)
    v = torch.randn(b, a, s, d, device=dev, dtype=bf16, requires_grad=True)

    def run():
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        o.sum().backward()

    return {"fwd_bwd_ms": timed(run)}


def rmsnorm(s, b, h):
    n = torch.nn.RMSNorm(h, eps=1e-5, device=dev, dtype=bf16)
    x = torch.randn(s, b, h, device=dev, dtype=bf16, requires_grad=True)
    go = torch.randn(s, b, h, device=dev, dtype=bf16)
    return {"fwd_bwd_ms": timed(lambda: n(x).backward(go)), "elems": s * b * h}


def rope(s, b, a, g, d):
    freqs = torch.randn(s, 1, 1, d, device=dev)
    cos_, sin_ = torch.cos(freqs).to(bf16), torch.sin(freqs).to(bf16)

    def apply(t):
        t, t_pass = t[..., :d], t[..., d:]
        x1, x2 = torch.chunk(t, 2, dim=-1)
        rot = torch.cat((-x2, x1), dim=-1)
        t = (t * cos_) + (rot * sin_)
        return torch.cat((t, t_pass), dim=-1)

    q = torch.randn(s, b, a, d, device=dev, dtype=bf16, requires_grad=True)
    k = torch.randn(s, b, g, d, device=dev, dtype=bf16, requires_grad=True)
    gq, gk = torch.randn_like(q), torch.randn_like(k)

    def run():
        torch.autograd.backward([apply(q), apply(k)], [gq, gk])

    return {"fwd_bwd_ms": timed(run), "elems": s * b * (a + g) * d}


def cross_entropy(tokens, vocab):
    """tensor_parallel.vocab_parallel_cross_entropy at TP 1, as its autograd Function runs it."""
    logits = torch.randn(tokens, 1, vocab, device=dev, dtype=bf16, requires_grad=True)
    target = torch.randint(0, vocab, (tokens, 1), device=dev)

    class CE(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, t):
            x = x.float()
            mx = torch.max(x, dim=-1)[0]
            x -= mx.unsqueeze(-1)
            x2 = x.view(-1, vocab)
            ar = torch.arange(x2.size(0), device=dev)
            pred = x2[ar, t.view(-1)].clone().view_as(t)
            torch.exp(x, out=x)
            se = x.sum(dim=-1)
            loss = torch.log(se) - pred
            x.div_(se.unsqueeze(-1))
            ctx.save_for_backward(x, t)
            return loss

        @staticmethod
        def backward(ctx, go):
            sm, t = ctx.saved_tensors
            g2 = sm.view(-1, vocab)
            ar = torch.arange(g2.size(0), device=dev)
            g2[ar, t.view(-1)] -= 1.0
            sm.mul_(go.unsqueeze(-1))
            return sm, None

    def run():
        CE.apply(logits, target).sum().backward()

    return {"fwd_bwd_ms": timed(run, iters=5), "elems": tokens * vocab}


def adam(params):
    """Megatron-Core's mixed-precision step without TE or Apex: BF16 grad -> FP32 main grad,
    the grad norm, torch's foreach AdamW, FP32 main -> BF16 model params, zeroing the grads."""
    sizes = params
    model = [torch.randn(n, device=dev, dtype=bf16) for n in sizes]
    grads = [torch.randn(n, device=dev, dtype=bf16) for n in sizes]
    main = [torch.nn.Parameter(m.float()) for m in model]
    opt = torch.optim.AdamW(main, lr=1e-4, weight_decay=0.1)
    for m in main:
        m.grad = torch.zeros_like(m)
    opt.step()

    def run():
        for m, g in zip(main, grads):
            m.grad = g.float()
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(m.grad) for m in main]))
        opt.step()
        for mp, m in zip(model, main):
            mp.copy_(m)
        for g in grads:
            g.zero_()
        return norm

    return {"step_ms": timed(run, iters=5, warm=2), "params": sum(sizes)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args()
    out = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
    h, ffn, a, g, s, b, vocab = 2048, 8192, 16, 8, 2048, 1, 128256
    d = h // a
    for name, (ss, aa) in {"base": (s, a), "heads32": (s, 32), "seq4096": (4096, a)}.items():
        out[f"attention_{name}"] = core_attention(ss, b, aa, g, h // aa)
        out[f"flash_{name}"] = flash(ss, b, aa, g, h // aa)
    out["rmsnorm"] = rmsnorm(s, b, h)
    out["rope"] = rope(s, b, a, g, d)
    out["cross_entropy"] = cross_entropy(s * b, vocab)
    layer = [h * (a * d + 2 * g * d), a * d * h, h * 2 * ffn, ffn * h, h, h]
    out["adam"] = adam([vocab * h, vocab * h] + layer * 4 + [h])
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        open(args.out, "w").write(text + "\n")


if __name__ == "__main__":
    main()
