"""PyTorch baselines on the GPU: eager fp16 (cuDNN benchmark on) and
torch.compile(mode="max-autotune"), timed with CUDA events; cuBLAS GEMM,
cuDNN conv and device-to-device copy for the micro benchmarks.

Latency is the median of per-iteration CUDA-event times after a warm-up, as
METHOD.md asks (the machines are noisy; medians, not means)."""
import statistics
import time


def _torch():
    import torch
    return torch


def event_times_ms(fn, iterations, warmup):
    torch = _torch()
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iterations):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def device_inputs(inputs, in_names):
    torch = _torch()
    return [torch.from_numpy(inputs[n]).cuda() for n in in_names]


def to_fp16(module):
    """fp16 weights; integer inputs (token ids) stay integers."""
    return module.half().cuda().eval()


def half_inputs(args):
    torch = _torch()
    return [a.half() if a.is_floating_point() else a for a in args]


def time_eager(module, args, iterations, warmup):
    torch = _torch()
    torch.backends.cudnn.benchmark = True
    with torch.inference_mode():
        return statistics.median(event_times_ms(lambda: module(*args), iterations, warmup))


def compile_module(module, args, mode="max-autotune"):
    """(compiled module, seconds spent compiling: the first calls)."""
    torch = _torch()
    compiled = torch.compile(module, mode=mode)
    t0 = time.perf_counter()
    with torch.inference_mode():
        compiled(*args)
        torch.cuda.synchronize()
    return compiled, time.perf_counter() - t0


def time_compiled(compiled, args, iterations, warmup):
    torch = _torch()
    with torch.inference_mode():
        return statistics.median(event_times_ms(lambda: compiled(*args), iterations, warmup))


def run_for_seconds(fn, seconds):
    """Keeps the GPU busy for about `seconds` (power sampling); returns calls."""
    torch = _torch()
    calls, t0 = 0, time.perf_counter()
    with torch.inference_mode():
        while time.perf_counter() - t0 < seconds:
            fn()
            calls += 1
        torch.cuda.synchronize()
    return calls


def gemm_tflops(n, iterations=50):
    torch = _torch()
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    ms = statistics.median(event_times_ms(lambda: a @ b, iterations, 10))
    return 2.0 * n ** 3 / (ms * 1e-3) / 1e12


def conv_tflops(batch, channels, hw, iterations=50):
    torch = _torch()
    torch.backends.cudnn.benchmark = True
    x = torch.randn(batch, channels, hw, hw, device="cuda", dtype=torch.float16).to(memory_format=torch.channels_last)
    conv = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False).cuda().half().to(
        memory_format=torch.channels_last)
    with torch.inference_mode():
        ms = statistics.median(event_times_ms(lambda: conv(x), iterations, 10))
    return 2.0 * batch * hw * hw * channels * channels * 9 / (ms * 1e-3) / 1e12


def copy_gbps(nbytes, iterations=100):
    """Device-to-device copy bandwidth, counting bytes read and written."""
    torch = _torch()
    x = torch.empty(nbytes // 2, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    ms = statistics.median(event_times_ms(lambda: y.copy_(x), iterations, 10))
    return 2.0 * nbytes / (ms * 1e-3) / 1e9
