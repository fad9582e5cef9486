"""The run()/check() harness shared by the tests/cli/test_*.py scripts: they run as
`python3 tests/cli/test_x.py`, so this sibling module is importable through sys.path[0]."""
import subprocess

failures = []
checks = [0]


def run(ingot, *args, env=None, timeout=300):
    """Runs the ingot binary; returns (exit code, stdout, stderr)."""
    p = subprocess.run([ingot, *args], capture_output=True, text=True, timeout=timeout, env=env)
    return p.returncode, p.stdout, p.stderr


def check(name, cond, detail="", detail_tail=None):
    """Records one check; a failure prints `detail` (its last `detail_tail` characters if given)."""
    checks[0] += 1
    if detail_tail is not None:
        detail = detail[-detail_tail:]
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else f"\n     {detail}"))
    if not cond:
        failures.append(name)


def summary():
    """Prints the tally; returns the script's exit code."""
    print(f"{checks[0] - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0
