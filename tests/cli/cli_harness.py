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


def engine_checksum(data):
    """The engine file's checksum as src/engine/engine_format.cc writes it: FNV-1a over 8-byte
    little-endian words then bytes, the file read with its checksum field (bytes 48..56) as zero.
    Tests that rewrite a header field (another version, another GPU arch) re-sign the file with it,
    so the field's own check is what refuses the file."""
    mask, prime = (1 << 64) - 1, 0x100000001b3

    def update(h, chunk):
        i = 0
        while i + 8 <= len(chunk):
            h = ((h ^ int.from_bytes(chunk[i:i + 8], "little")) * prime) & mask
            i += 8
        for b in chunk[i:]:
            h = ((h ^ b) * prime) & mask
        return h
    return update(update(update(0xcbf29ce484222325, data[:48]), bytes(8)), data[56:])
