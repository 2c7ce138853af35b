"""The host side of a real eager training step: what `training.simulated_step.dispatch_share` defaults to, and why.

`python -m benchmarks dispatch_share [steps]` (then `check`: the default beside a DCP async_save, ~3 minutes).
A GPT-2 XL-shaped model in plain torch (48 layers, 25 heads, the parameters of transformers' GPT2LMHeadModel), one
training step as the H200 run took it (bf16 autocast, fused AdamW), its host time set against the H200's measured
step (0.378 s, `../shared/gpu/h200-torch.json`): the share of a step the rank's Python thread spends dispatching,
holding the GIL and a core.

The host time is measured on the CPU with the same graph on tiny tensors (same layers, heads, ops and autograd;
n_embd 25, one token, then two): every op is dispatched through autocast, autograd and the dispatcher as on a
GPU, and its kernel costs little (the second token's cost, taken off once more, leaves the dispatch alone). A CUDA
op's launch (cudaLaunchKernel, LAUNCH_US) is added per op, as a GPU's host pays it. The default is the middle of
the range from "dispatch alone + launches" to "one token's step + launches". PyTorch's
`meta` device (no kernels at full size) was the first choice and is printed too, as what it is not: its elementwise
shape functions are Python decompositions (prims, ~200 µs an op), so it puts the host at several times the whole
H200 step. The figure depends on this machine's CPU (the H200 machine's host is another): printed with its name.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

H200_STEP_S = 0.378  # ../shared/gpu/h200-torch.json step_idle.mean_s
DEFAULT_SHARE = 0.25  # studyctl.definition.inputs.training.DISPATCH_SHARE, the figure this benchmark derives
LAUNCH_US = 4.0  # a CUDA kernel launch's host cost (cudaLaunchKernel, typically 2-5 µs)
N_LAYER, N_HEAD = 48, 25
XL = {"n_embd": 1600, "vocab": 50257, "seq": 1024, "batch": 8}  # the H200 run's shape
# The same graph on the least tensors it takes (25 heads of 1 channel, 1 and 2 tokens): the second token's cost
# is kernel work, so one token less than the first is the step's dispatch alone (extrapolated).
TINY = ({"n_embd": 25, "vocab": 8, "seq": 1, "batch": 1}, {"n_embd": 25, "vocab": 8, "seq": 2, "batch": 1})


def gpt2(torch: Any, n_embd: int, vocab: int, seq: int, casts: bool, n_layer: int = N_LAYER,
         n_head: int = N_HEAD) -> Any:
    """GPT-2 (fp32 parameters, tied head; `seq` learned positions). `casts`: autocast's casts written out (for
    `meta`, which autocast does not know): a weight's bf16 copy per use, matmul and attention in bf16, layer norm
    and the loss in fp32."""
    nn, F = torch.nn, torch.nn.functional
    bf16 = torch.bfloat16

    def linear(x: Any, layer: Any) -> Any:
        if not casts:
            return layer(x)
        return F.linear(x.to(bf16), layer.weight.to(bf16), layer.bias.to(bf16))

    def norm(x: Any, layer: Any) -> Any:
        return layer(x.float() if casts else x)

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
            self.c_attn, self.attn_proj = nn.Linear(n_embd, 3 * n_embd), nn.Linear(n_embd, n_embd)
            self.c_fc, self.mlp_proj = nn.Linear(n_embd, 4 * n_embd), nn.Linear(4 * n_embd, n_embd)

        def forward(self, x: Any) -> Any:
            b, t, _ = x.shape
            q, k, v = linear(norm(x, self.ln_1), self.c_attn).split(n_embd, dim=2)
            q, k, v = (y.view(b, t, n_head, n_embd // n_head).transpose(1, 2) for y in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, n_embd)
            x = x + F.dropout(linear(y, self.attn_proj), 0.1)
            h = F.gelu(linear(norm(x, self.ln_2), self.c_fc), approximate="tanh")
            return x + F.dropout(linear(h, self.mlp_proj), 0.1)

    class GPT2(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, n_embd), nn.Embedding(seq, n_embd)
            self.h = nn.ModuleList(Block() for _ in range(n_layer))
            self.ln_f = nn.LayerNorm(n_embd)

        def forward(self, idx: Any) -> Any:
            x = F.dropout(self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device)), 0.1)
            for block in self.h:
                x = block(x)
            head = self.wte.weight.to(bf16) if casts else self.wte.weight
            logits = F.linear(norm(x, self.ln_f).to(bf16) if casts else norm(x, self.ln_f), head)  # the tied head
            return F.cross_entropy((logits.float() if casts else logits).view(-1, vocab), idx.view(-1))

    return GPT2()


class OpCounter:
    """Counts the ATen ops a step dispatches (each one a kernel launch, or more, on a GPU)."""

    def __init__(self, torch: Any) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        outer = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                outer.ops += 1
                return func(*args, **(kwargs or {}))

        self.ops = 0
        self.mode = Mode()


class Step:
    """One eager training step of the model on `device`: forward and backward, then the optimizer."""

    def __init__(self, torch: Any, device: str, shape: dict[str, int], amp: bool = True, n_layer: int = N_LAYER,
                 n_head: int = N_HEAD) -> None:
        meta = device == "meta"
        with torch.device(device):
            self.model = gpt2(torch, shape["n_embd"], shape["vocab"], shape["seq"], casts=meta, n_layer=n_layer,
                              n_head=n_head)
        self.params = sum(p.numel() for p in self.model.parameters())
        # fused AdamW as the H200 run; `meta` has no fused kernel: foreach, more Python than fused
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4, **(
            {"foreach": True} if meta else {"fused": True}))
        self.idx = torch.zeros(shape["batch"], shape["seq"], dtype=torch.long, device=device)
        self.autocast: Callable[[], Any] = (
            (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if amp and not meta
            else __import__("contextlib").nullcontext)
        self.torch = torch

    def forward_backward(self) -> None:
        with self.autocast():
            loss = self.model(self.idx)
        loss.backward()

    def optimize(self) -> None:
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def ops(self) -> int:
        """ATen ops one step dispatches (a GPU launches a kernel, or more, for each)."""
        counter = OpCounter(self.torch)
        with counter.mode:
            self.forward_backward()
            self.optimize()
        return counter.ops

    def host_s(self, steps: int) -> float:
        """The median of `steps` steps' thread CPU time (the dispatching thread's own, whatever else runs)."""
        self.forward_backward(), self.optimize()  # warm: the optimizer's state, first-call caches
        times = []
        for _ in range(steps):
            cpu = time.thread_time()
            self.forward_backward()
            self.optimize()
            times.append(time.thread_time() - cpu)
        return statistics.median(times)


def main(steps: int = 5) -> None:
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)  # tiny kernels: no intra-op threads to hand work to
    print(f"\n## Dispatch share of an eager GPT-2 XL training step (`python -m benchmarks dispatch_share {steps}`)")
    print(f"# torch {torch.__version__}, CPU: {_cpu_name()}; against the H200's {H200_STEP_S} s step "
          f"(GPT-2 XL, batch 8 x 1024, bf16 autocast, fused AdamW)")
    hosts = []
    for shape in TINY:
        step = Step(torch, "cpu", shape)
        host, ops = step.host_s(steps), step.ops()
        hosts.append(host)
        print(f"cpu, n_embd {shape['n_embd']}, {shape['batch']} x {shape['seq']} tokens ({step.params:,} params): "
              f"{ops} ops, host {host * 1e3:.1f} ms ({host / ops * 1e6:.1f} µs/op)")
    launch = ops * LAUNCH_US * 1e-6
    alone = 2 * hosts[0] - hosts[1]
    low, high = (alone + launch) / H200_STEP_S, (hosts[0] + launch) / H200_STEP_S
    print(f"dispatch alone (one token less): {alone * 1e3:.1f} ms; launches ({ops} x {LAUNCH_US:.0f} µs): "
          f"{launch * 1e3:.1f} ms; host share of the step: {low:.3f} to {high:.3f}")
    meta = Step(torch, "meta", XL)
    host, ops = meta.host_s(1), meta.ops()
    print(f"meta, the XL shape ({meta.params:,} params): {ops} ops, host {host * 1e3:.0f} ms ({host / ops * 1e6:.0f} "
          f"µs/op) = {host / H200_STEP_S:.2f} of the step (Python shape functions: not the GPU's host cost)")
    print(f"default dispatch_share: {round_share(low, high):.2f} (the middle of {low:.3f} to {high:.3f}, to 0.05)")
    check(1.0)


def round_share(low: float, high: float) -> float:
    """The default: the middle of the measured range, to 0.05 (a figure of this machine's CPU, not finer)."""
    return max(0.05, math.floor((low + high) / 2 / 0.05 + 0.5) * 0.05)


def _cpu_name() -> str:
    with open("/proc/cpuinfo") as f:
        return next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "unknown CPU")


if __name__ == "__main__":
    main()


def xl_state(torch: Any, total_bytes: int) -> dict[str, Any]:
    """The H200 run's state (fp32 weights, Adam m and v, a step per parameter: 2,321 tensors), every tensor shrunk
    by one factor to `total_bytes`, on the host."""
    with torch.device("meta"):
        model = gpt2(torch, XL["n_embd"], XL["vocab"], XL["seq"], casts=True)
    shapes = [(name, p.numel()) for name, p in model.named_parameters()]
    factor = total_bytes / (3 * 4 * sum(n for _, n in shapes))
    state: dict[str, Any] = {}
    for name, n in shapes:
        size = max(1, int(n * factor))
        for part in ("w", "m", "v"):
            state[f"{name}.{part}"] = torch.rand(size)
        state[f"{name}.step"] = torch.tensor(1.0)
    return state


def lost_beside_async_save(torch: Any, share: float, stager: str, state: dict[str, Any], folder: str) -> str:
    """DCP async_save of `state` beside simulated steps of `share` (the H200's step time): the steps' slowdown
    while it ran, against idle steps before and after, as the H200 run measured it."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

    from worker.compute import DeviceCompute

    work = DeviceCompute(H200_STEP_S, share)
    work.calibrate()

    def step() -> float:
        start = time.perf_counter()
        work.run()
        return time.perf_counter() - start

    idle = [step() for _ in range(5)]
    options = {"default": {}, "shared+async": {"async_stager": DefaultStager(StagingOptions(
        use_pinned_memory=False, use_shared_memory=True, use_async_staging=True, use_non_blocking_copy=False))}}
    start = time.perf_counter()
    response = dcp.async_save(state, checkpoint_id=folder, no_dist=True, **options[stager])
    blocked = time.perf_counter() - start
    future = getattr(response, "upload_completion", response)
    during = []
    while not future.done():
        during.append(step())
    future.result()
    persist = time.perf_counter() - start
    idle += [step() for _ in range(5)]
    mean = statistics.fmean(idle)
    lost = math.fsum(during) - len(during) * mean
    return (f"share {share:.2f}, stager {stager}: blocked {blocked:.2f} s, persist {persist:.1f} s, "
            f"{len(during)} steps beside it: {statistics.fmean(during) / mean - 1:+.1%} step time "
            f"({lost:.2f} s lost; idle step {mean * 1e3:.0f} ms)" if during else "no step ran beside it")


def check(gib: float = 2.0) -> None:
    """The default against the H200's lost compute: DCP async_save of host tensors beside the simulated step."""
    import shutil
    import tempfile

    import torch

    state = xl_state(torch, int(gib * (1 << 30)))
    print(f"\n### Beside a DCP async_save on this machine ({len(state)} tensors, {gib} GiB, host tensors: the "
          f"stager's copy is a memcpy; 2 cores, so the persist and the step share them)")
    print("H200, 17.7 GiB: default stager +1.9% over 138 steps (0.96 s lost); pinned+shared+async +16-22% "
          "(7.7-9.9 s lost)")
    for stager in ("default", "shared+async"):
        for share in (0.0, DEFAULT_SHARE):
            folder = tempfile.mkdtemp(dir="/var/tmp", prefix="dispatch-share-")
            try:
                print(lost_beside_async_save(torch, share, stager, state, folder))
            finally:
                shutil.rmtree(folder)


def cpu_share(steps: int = 7) -> float:
    """`compute: cpu`'s default share: the host dispatch of the engine check's real CPU job (`real_training`'s
    `cpu` shape, fp32, fused AdamW, 1 intra-op thread), the same graph on tiny tensors as above (no launches: its
    kernels run on the same thread), over that job's own step at its shape, both in the thread's CPU time (which
    load does not stretch; with one intra-op thread the step's kernels run on it)."""
    import torch

    from benchmarks.real_training import SHAPES, Job

    torch.manual_seed(0)
    torch.set_num_threads(1)
    shape = SHAPES["cpu"]
    print(f"\n## Dispatch share of the engine check's CPU training step (`dispatch_share.cpu_share({steps})`)")
    print(f"# torch {torch.__version__}, CPU: {_cpu_name()}; real_training's `cpu` shape ({shape.n_layer} layers x "
          f"{shape.n_embd}, batch {shape.batch} x {shape.seq}), fp32, fused AdamW, 1 intra-op thread; "
          f"load {os.getloadavg()[0]:.1f}")
    hosts = []
    for tiny in TINY:
        step = Step(torch, "cpu", tiny, amp=False, n_layer=shape.n_layer, n_head=shape.n_head)
        host, ops = step.host_s(steps), step.ops()
        hosts.append(host)
        print(f"tiny, n_embd {tiny['n_embd']}, {tiny['seq']} token(s): {ops} ops, host {host * 1e3:.1f} ms "
              f"({host / ops * 1e6:.1f} µs/op)")
    alone = 2 * hosts[0] - hosts[1]
    job = Job(torch, shape, "cpu")
    job.steps(3)
    walls, cpus = [], []
    for _ in range(steps):
        cpu = time.thread_time()
        walls.append(job.step())
        cpus.append(time.thread_time() - cpu)
    full = statistics.median(cpus)
    share = alone / full
    print(f"dispatch alone (one token less): {alone * 1e3:.1f} ms; the step at its shape: {full * 1e3:.0f} ms CPU "
          f"({statistics.median(walls) * 1e3:.0f} ms wall); share {share:.3f} (with one token's kernels: "
          f"{hosts[0] / full:.3f}); load {os.getloadavg()[0]:.1f}")
    return share
