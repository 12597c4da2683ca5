"""GPU power while something runs: nvidia-smi samples power.draw every
100 ms in the background (NVML through its CLI; no extra package)."""
import shutil
import subprocess


class PowerSampler:
    def __enter__(self):
        self.proc = None
        if shutil.which("nvidia-smi"):
            self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=power.draw", "--format=csv,noheader,nounits",
                                          "-lms", "100"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        return self

    def __exit__(self, *exc):
        self.watts = None
        if self.proc is None:
            return False
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=10)
        samples = []
        for line in out.splitlines():
            try:
                samples.append(float(line.strip()))
            except ValueError:
                pass  # "[N/A]" or a partial line at termination
        # The first samples can predate the load; drop the first 10%.
        samples = samples[len(samples) // 10:]
        self.watts = sum(samples) / len(samples) if samples else None
        return False
