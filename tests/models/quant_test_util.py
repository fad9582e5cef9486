# Copyright ingot authors. Apache-2.0.
"""What the accuracy tests on real data (test_int8_accuracy.py, test_minilm_quant.py) share: a
printed check list that remembers its failures, and the `ingot` command run with its output."""
import subprocess

FAILED = []


def check(name, cond, detail=""):
    """Prints 'ok' or 'FAIL' (with `detail`) for one named check; failures go to FAILED."""
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else f"\n     {detail}"), flush=True)
    if not cond:
        FAILED.append(name)


def ingot(binary, *cmd, timeout=1800):
    """stdout + stderr of `binary cmd...`; a RuntimeError with both tails when it fails."""
    p = subprocess.run([binary, *cmd], capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"ingot {' '.join(cmd)}: rc {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p.stdout + p.stderr
