#!/usr/bin/env python3
"""ckpt_tensors.py A B [RTOL ATOL] - do two safetensors checkpoints hold the
same tensors? (the command-line tests' comparison: kill_resume.sh,
test_mpi.sh; the standard library only)

Without tolerances: the same names and every tensor's bytes identical. With
them: every float32 value within ATOL + RTOL |a|. Prints what it found;
exits 0 when they agree, 1 otherwise.
"""
import array
import json
import struct
import sys


def tensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    h.pop("__metadata__", None)
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items()}


def main():
    if len(sys.argv) not in (3, 5):
        sys.exit("usage: ckpt_tensors.py A B [RTOL ATOL]")
    a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
    if a.keys() != b.keys():
        print("the tensor names differ")
        return 1
    if len(sys.argv) == 3:
        same = all(a[k] == b[k] for k in a)
        print("identical" if same else "not identical")
        return 0 if same else 1
    rtol, atol = float(sys.argv[3]), float(sys.argv[4])
    worst, where = 0.0, ""
    for k in a:
        for u, v in zip(array.array("f", a[k]), array.array("f", b[k])):
            d = abs(u - v) / (atol + rtol * abs(u))
            if d > worst:
                worst, where = d, k
    print(f"largest difference {worst:.3f} of the tolerance (in {where})")
    return 0 if worst <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
