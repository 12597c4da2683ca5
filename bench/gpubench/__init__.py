"""kiln's GPU benchmark against PyTorch (bench/gpu.sh); see docs/benchmarks.md."""
