"""Apply the two source guards the real-SGLang lane needs to the packages installed in the interpreter that runs this
script (the lane's venv): python scripts/real_sglang/patch_installed.py [--check]

1. torchvision: PyPI's wheel is a CUDA build whose C++ ops do not load beside a CPU torch, and its
   _meta_registrations.py then dies at import on register_fake("torchvision::nms") (and qnms). The two registrations
   are made only when torchvision's ops did load (torchvision.extension._has_ops()).
2. sglang 0.5.23, disaggregation/prefill.py: with mooncake the sender takes host-side page indices, a branch that
   pins memory and records a torch.cuda.Event. It is taken only when CUDA is there (torch.cuda.is_available()).

Each edit is applied once (a second run finds it applied and changes nothing); a file in which neither the original
text nor the edited one is found is an error (another version of the package), and so is a file outside this
interpreter's prefix (never edit the base interpreter's packages through a --system-site-packages venv).
--check only reports, and exits 1 when an edit is missing.
"""

from __future__ import annotations

import importlib.util
import py_compile
import sys
from pathlib import Path

MARK = "  # pdctl real-SGLang lane: guarded"

EDITS = [
    # (package, file inside it, original text, edited text)
    *(
        (
            "torchvision",
            "_meta_registrations.py",
            f'@torch.library.register_fake("torchvision::{op}")\n',
            f'@(torch.library.register_fake("torchvision::{op}") if torchvision.extension._has_ops()'
            f" else (lambda fn: fn)){MARK}\n",
        )
        for op in ("nms", "qnms")
    ),
    (
        "sglang",
        "srt/disaggregation/prefill.py",
        '            if getattr(sender, "supports_host_tensor_indices", False) and not (\n',
        '            if getattr(sender, "supports_host_tensor_indices", False) and torch.cuda.is_available() and not ('
        f"{MARK}\n",
    ),
]


def package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)  # finds the package without importing it (torchvision would fail)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"patch_installed: package {name!r} is not installed for {sys.executable}")
    where = Path(next(iter(spec.submodule_search_locations))).resolve()
    if not where.is_relative_to(Path(sys.prefix).resolve()):
        raise SystemExit(f"patch_installed: {name} is at {where}, outside {sys.prefix}: refusing to edit it")
    return where


def main(argv: list[str]) -> int:
    check_only = argv[1:] == ["--check"]
    if argv[1:] and not check_only:
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    missing = 0
    for package, rel, old, new in EDITS:
        path = package_dir(package) / rel
        text = path.read_text()
        label = f"{package}/{rel}: {old.strip()[:70]}"
        if new in text:
            print(f"already applied  {label}")
            if not check_only:
                py_compile.compile(str(path), doraise=True)
            continue
        if text.count(old) != 1:
            raise SystemExit(
                f"patch_installed: expected exactly one {old.strip()!r} in {path}, found {text.count(old)}: "
                "another version of the package?"
            )
        if check_only:
            print(f"MISSING          {label}")
            missing += 1
            continue
        path.write_text(text.replace(old, new))
        py_compile.compile(str(path), doraise=True)  # bytecode too: PYTHONDONTWRITEBYTECODE may be set
        print(f"applied          {label}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
