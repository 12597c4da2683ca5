"""The printed table and the JSON file (keys: docs/benchmarks.md)."""
import datetime
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def commit():
    p = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return (p.stdout.strip() or "unknown") + ("-dirty" if dirty else "")


def header(gpu, driver, cuda, dry_run, backend):
    return {"gpu": gpu, "driver": driver, "cuda": cuda, "commit": commit(),
            "date": datetime.date.today().isoformat(), "dry_run": dry_run, "kiln_backend": backend,
            "models": [], "micro": []}


def _f(x, spec="{:.3f}"):
    return "-" if x is None else spec.format(x)


def _ratio(a, b):
    return None if a is None or b is None or a == 0 else b / a


def print_table(r):
    gpu = r["gpu"] or "no GPU (dry run: kiln on the reference backend, GPU columns empty)"
    print(f"\n{gpu} | driver {r['driver'] or '-'} | CUDA {r['cuda'] or '-'} | commit {r['commit']} | {r['date']}")
    print(f"{'model':<14}{'batch':>6}{'kiln ms':>10}{'e2e ms':>10}{'eager ms':>10}{'compile ms':>11}"
          f"{'x eager':>9}{'x compile':>10}{'max err':>10}{'x tol':>7}{'inf/J kiln':>11}{'inf/J cmp':>10}"
          f"{'cold s':>8}{'cached s':>9}")
    for m in r["models"]:
        print(f"{m['name']:<14}{m['batch']:>6}{_f(m['kiln_ms']):>10}{_f(m.get('kiln_e2e_ms')):>10}"
              f"{_f(m['eager_ms']):>10}{_f(m['compile_ms']):>11}"
              f"{_f(_ratio(m['kiln_ms'], m['eager_ms']), '{:.2f}'):>9}"
              f"{_f(_ratio(m['kiln_ms'], m['compile_ms']), '{:.2f}'):>10}"
              f"{_f(m.get('kiln_max_abs_err'), '{:.2e}'):>10}{_f(m.get('kiln_err_x_tolerance'), '{:.2f}'):>7}"
              f"{_f(m.get('kiln_inf_per_j'), '{:.1f}'):>11}{_f(m.get('compile_inf_per_j'), '{:.1f}'):>10}"
              f"{_f(m.get('kiln_compile_s_cold'), '{:.2f}'):>8}{_f(m.get('kiln_compile_s_cached'), '{:.2f}'):>9}")
    print("(x eager / x compile: speed-up of kiln, >1 is faster; latency at batch 1, throughput at the large batch)")
    print(f"\n{'micro':<22}{'kiln':>12}{'baseline':>12}{'ratio':>8}  unit")
    for m in r["micro"]:
        if "kiln_tflops" in m:
            base_key = "cublas_tflops" if "cublas_tflops" in m else "cudnn_tflops"
            k, b, unit = m["kiln_tflops"], m.get(base_key), f"TFLOP/s vs {base_key.split('_')[0]}"
        else:
            k, b, unit = m["kiln_gbps"], m.get("copy_gbps"), "GB/s vs device-to-device copy"
        print(f"{m['name']:<22}{_f(k):>12}{_f(b):>12}{_f(None if not b else k / b, '{:.2f}'):>8}  {unit}")


def write(r, path):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(r, f, indent=2)
        f.write("\n")
    print(f"\nwrote {path}")
