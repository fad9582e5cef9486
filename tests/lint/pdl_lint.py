#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""Checks the two rules of backend/cuda/core/launch.cuh over src/ (a CPU test).

Programmatic dependent launch lets a kernel's blocks be scheduled before the previous kernel in the
stream has finished. That is only correct when the kernel waits (griddepcontrol.wait) before it
touches memory, so:
  1. every __global__ function in src/ starts with INGOT_KERNEL_ENTRY() (generated sources: PW_ENTRY()),
     before any other statement;
  2. no <<<>>> launch in src/: launches go through launch_kernel().
Prints every violation with file and line; exits 1 if there is one. `--self-test` checks that the
checker finds planted violations (so the test can fail).
"""
import pathlib
import re
import sys

ENTRY = re.compile(r"\s*(INGOT_KERNEL_ENTRY|PW_ENTRY)\(\);")


def body_start(text, at):
    """Index just after the '{' opening the function whose declaration starts at `at`, or None for a
    declaration without a body: the first '{' or ';' outside parentheses (__launch_bounds__(...) and
    the parameter list)."""
    depth = 0
    for i in range(at, len(text)):
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif depth == 0 and c == "{":
            return i + 1
        elif depth == 0 and c == ";":
            return None
    return None


def check_text(name, text, generated=False):
    problems = []
    for m in re.finditer(r"__global__", text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        line = text[line_start:m.start()]
        if line.lstrip().startswith("//") or line.lstrip().startswith("*"):
            continue
        in_string = '"' in line  # a kernel inside a generated source string (pointwise codegen)
        if in_string != generated:
            continue
        if generated:
            # generated: the entry follows within the string text that opens the body
            after = text[m.end():m.end() + 400]
            if "PW_ENTRY()" not in after.split("}")[0]:
                problems.append(f"{name}:{text.count(chr(10), 0, m.start()) + 1}: generated kernel without PW_ENTRY()")
            continue
        b = body_start(text, m.end())
        if b is None:
            continue
        if not ENTRY.match(text[b:]):
            problems.append(f"{name}:{text.count(chr(10), 0, m.start()) + 1}: kernel does not start with INGOT_KERNEL_ENTRY()")
    for m in re.finditer(r"<<<", text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        if text[line_start:m.start()].lstrip().startswith("//"):
            continue
        problems.append(f"{name}:{text.count(chr(10), 0, m.start()) + 1}: <<<>>> launch (use launch_kernel)")
    return problems


def self_test():
    bad = check_text("planted.cu", "__global__ void k(int* x) {\n  if (!x) return;\n  INGOT_KERNEL_ENTRY();\n}\n"
                     "void f() { k<<<1, 1>>>(nullptr); }\n")
    good = check_text("good.cu", "template <int N>\n__global__ void __launch_bounds__(256) k(int* x) {\n"
                      "  INGOT_KERNEL_ENTRY();\n  x[0] = N;\n}\n__global__ void decl(int*);\n")
    gen_bad = check_text("gen.cc", 'os << "extern \\"C\\" __global__ void pw(A a) { impl(a); }";\n', generated=True)
    ok = len(bad) == 2 and not good and len(gen_bad) == 1
    print("self-test:", "ok" if ok else f"FAILED bad={bad} good={good} gen={gen_bad}")
    return ok


def main():
    if not self_test():
        return 1
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".") / "src"
    problems = []
    kernels = 0
    for p in sorted(root.rglob("*")):
        if p.suffix not in (".cu", ".cuh", ".cc", ".h") or p.name == "launch.cuh":
            continue
        text = p.read_text()
        kernels += len(re.findall(r"__global__", text))
        problems += check_text(str(p), text, generated=False)
        if "__global__" in text and p.suffix == ".cc":
            problems += check_text(str(p), text, generated=True)
    for x in problems:
        print(x)
    print(f"pdl lint: {kernels} __global__ occurrences under {root}, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
