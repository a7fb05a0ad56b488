"""The module layering of src/, checked on every #include: each folder may include only the
folders below it (docs/ARCHITECTURE.md draws the same graph). A new upward include (a backend
reaching into the engine, the engine into a device) fails this test."""
import pathlib
import re
import sys

ALLOWED = {
    "core": {"core"},
    "quant": {"core", "quant"},
    "kv": {"core", "kv"},
    "text": {"core", "text"},
    "model": {"core", "quant", "model", "text"},
    "executor": {"core", "kv", "model", "executor"},
    "backend": {"core", "quant", "kv", "model", "executor", "backend"},
    "engine": {"core", "kv", "text", "executor", "engine"},
    "server": {"core", "text", "executor", "engine", "server"},
    "cli": {"core", "quant", "kv", "text", "model", "executor", "backend", "engine", "server", "cli"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')


def main():
    src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "src")
    errors = []
    checked = 0
    for path in sorted(src.rglob("*")):
        if path.suffix not in {".h", ".cpp", ".cu", ".cuh", ".inc"}:
            continue
        module = path.relative_to(src).parts[0]
        if module not in ALLOWED:
            errors.append(f"{path}: folder '{module}' has no layering rule")
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            checked += 1
            target = match.group(1)
            if target in ALLOWED and target not in ALLOWED[module]:
                errors.append(f"{path}:{number}: {module}/ includes {target}/ ({line.strip()})")
    if checked < 100:
        errors.append(f"only {checked} includes seen under {src}: wrong folder?")
    for error in errors:
        print(error)
    print(f"layering: {checked} includes checked, {len(errors)} violations")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
