#!/usr/bin/env python3
"""Keeps the architecture as ARCHITECTURE.md draws it.

1. The crates stand in layers: a crate depends (in [dependencies]) only on Weft crates of a
   lower layer (LAYERS below). Cargo already refuses a circle of crates; this keeps the order.
2. No import circle inside any crate: a file that takes a name from another file (by `use` or
   a `crate::`/`super::` path) must not be reached back from it. A name is followed to the file
   that defines it, through `pub use` re-exports, so a `mod.rs` that only hands names on ties
   nothing. A module is made of its children, so a file may use what the modules around it
   define (`super::StoreError`) without that counting as an import; a parent using its child
   does count. Test modules (`#[cfg(test)] mod …`) are left out: a test may use anything.

Exits 1 naming each wrong dependency and each circle (the files, and the names that tie them);
`--graph` prints every crate's file-to-file imports instead.
"""

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Bottom first. A crate may use the crates of the layers below its own.
LAYERS = [
    # What stands on nothing of Weft's: the flow file, the LLM providers, the Python sandbox, and
    # two test tools (a scripted LLM server, a throwaway PostgreSQL).
    ["weft-alloc", "weft-flow", "weft-providers", "weft-sandbox", "weft-mcp", "weft-schedule", "weft-scripted-llm", "weft-test-postgres", "weft-fuzz"],
    ["weft-event", "weft-template"],
    ["weft-store", "weft-nodes"],
    ["weft-engine", "weft-history"],
    ["weft-testing", "weft-otel"],
    ["weft-api"],
    ["weft-server", "weft-restate"],
    ["weft-cli", "weft-app"],
]

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
DEFINITION = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:unsafe\s+|async\s+|const\s+|extern\s+\"C\"\s+)*"
    r"(struct|enum|fn|trait|type|const|static|union|mod)\s+(" + IDENT + ")",
    re.M,
)
MACRO_DEFINITION = re.compile(r"macro_rules!\s+(" + IDENT + ")")
USE = re.compile(r"(?:^|[;{}\s])(pub(?:\([^)]*\))?\s+)?use\s+([^;]*);", re.S)
PATH = re.compile(r"(?<![A-Za-z0-9_:$])\$?(crate|super|self)((?:::" + IDENT + r")+)")


def strip(text):
    """The code without comments, string and char literals, and test modules."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and not re.match(r"[A-Za-z0-9_]", text[i - 1] if i else " "):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            out.append('""')
            i = n if end < 0 else end + 1 + len(hashes)
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""')
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'|'\\u\{[0-9a-fA-F]+\}'|'\\x[0-9a-fA-F]{2}'", text[i:i + 12]):
            m = re.match(r"'(\\.|[^\\'])'|'\\u\{[0-9a-fA-F]+\}'|'\\x[0-9a-fA-F]{2}'", text[i:i + 12])
            out.append("' '")
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    code = "".join(out)
    # Test modules: `#[cfg(test)]` and the item after it, to its closing brace.
    while True:
        m = re.search(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+" + IDENT + r"\s*\{", code)
        if not m:
            break
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        code = code[:m.start()] + code[j:]
    # `#[cfg(test)] mod tests;` (a file of its own) and `#[cfg(test)] use …;`
    code = re.sub(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?(?:mod|use)\s[^;{]*;", "", code)
    return code


def use_tree(tree):
    """`a::{b, c::{d as e}}` -> [(['a','b'], 'b'), (['a','c','d'], 'e')]; a glob ends in '*'."""
    tree = re.sub(r"\s+", "", tree)
    results = []

    def walk(prefix, text):
        parts, depth, start = [], 0, 0
        for k, ch in enumerate(text):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(text[start:k])
                start = k + 1
        parts.append(text[start:])
        for part in filter(None, parts):
            brace = part.find("{")
            if brace >= 0 and part.endswith("}"):
                head = [s for s in part[:brace].split("::") if s]
                walk(prefix + head, part[brace + 1:-1])
                continue
            alias = None
            if "as" in part and re.search(r"[A-Za-z0-9_]as[A-Za-z_]", part):
                m = re.match(r"(.*?)as(" + IDENT + ")$", part)
                if m and not m.group(1).endswith("::"):
                    part, alias = m.group(1), m.group(2)
            segments = prefix + [s for s in part.split("::") if s]
            if segments and segments[-1] == "self":
                segments = segments[:-1]
            if segments:
                results.append((segments, alias or segments[-1]))

    walk([], tree)
    return results


class Crate:
    def __init__(self, name, src_root):
        self.name = name
        self.root_file = src_root
        self.files = {}  # module path (tuple) -> file
        self.modules = {}  # file -> module path
        self.add_module((), src_root)
        # Modules a macro declares (the node kinds' registry): every other file under src/ is
        # the module its path names; `#[path = "if.rs"] If => if_node::…` renames one.
        renamed = {}
        for file in list(self.modules):
            for m in re.finditer(r'#\[path\s*=\s*"([^"]+)"\]\s*(?:mod\s+(' + IDENT + r')|' + IDENT + r'\s*=>\s*(' + IDENT + r')::)', file.read_text()):
                renamed[(file.parent / m.group(1)).resolve()] = m.group(2) or m.group(3)
        src = src_root.parent
        for file in sorted(src.rglob("*.rs")):
            if file in self.modules or file.relative_to(src).parts[0] == "bin":
                continue
            parts = list(file.relative_to(src).with_suffix("").parts)
            if parts[-1] == "mod":
                parts.pop()
            parts[-1] = renamed.get(file.resolve(), parts[-1])
            if tuple(parts[:-1]) in self.files:
                self.add_module(tuple(parts), file)
        self.code = {f: strip(f.read_text()) for f in self.modules}
        self.definitions = {f: self.defined(c) for f, c in self.code.items()}
        self.reexports = {f: self.reexported(f, c) for f, c in self.code.items()}

    def add_module(self, path, file):
        self.files[path] = file
        self.modules[file] = path
        text = strip(file.read_text())
        base = file.parent if file.name in ("lib.rs", "main.rs", "mod.rs") else file.with_suffix("")
        for m in re.finditer(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*;", text, re.M):
            child = m.group(1)
            for candidate in (base / f"{child}.rs", base / child / "mod.rs"):
                if candidate.exists():
                    self.add_module(path + (child,), candidate)
                    break

    @staticmethod
    def defined(code):
        names = {m.group(2) for m in DEFINITION.finditer(code)}
        names |= {m.group(1) for m in MACRO_DEFINITION.finditer(code)}
        return names

    def reexported(self, file, code):
        names = {}
        for m in USE.finditer(code):
            if m.group(1):
                for segments, alias in use_tree(m.group(2)):
                    names[alias] = segments
        return names

    def absolute(self, file, segments):
        """The module path and the rest of `segments` as seen from `file`."""
        here = list(self.modules[file])
        # A file's own module is its module path; `super` is its parent's.
        head, rest = segments[0], segments[1:]
        if head in ("crate", "$crate"):
            return [], rest
        if head == "self":
            return here, rest
        if head == "super":
            base = here[:-1]
            while rest and rest[0] == "super":
                base, rest = base[:-1], rest[1:]
            return base, rest
        return None, segments

    def resolve(self, module, rest, seen=0):
        """The file that defines the item `rest` names under `module` (a module path)."""
        module = tuple(module)
        while rest and module + (rest[0],) in self.files:
            module, rest = module + (rest[0],), rest[1:]
        file = self.files.get(module)
        if file is None:
            return None
        if not rest or rest[0] == "*" or seen > 8:
            return file
        name = rest[0]
        if name in self.definitions[file]:
            return file
        target = self.reexports[file].get(name)
        if target:
            base, tail = self.absolute(file, target)
            if base is None:
                # `pub use child::Name;` names a child module of this file.
                if module + (target[0],) in self.files:
                    base, tail = list(module), target
                else:
                    return None
            return self.resolve(base, tail + rest[1:], seen + 1)
        return file

    def edges(self):
        """file -> {file it imports from: {names}}"""
        graph = {f: {} for f in self.modules}
        for file, code in self.code.items():
            here = self.modules[file]

            def add(target, name):
                # What an enclosing module defines is the file's own surroundings, not an import.
                if target and target != file and self.modules[target] != here[: len(self.modules[target])]:
                    graph[file].setdefault(target, set()).add(name)

            aliases = {}
            for m in USE.finditer(code):
                for segments, alias in use_tree(m.group(2)):
                    base, rest = self.absolute(file, segments)
                    if base is None:
                        # `use child::Name` of a mod.rs; else another crate.
                        module = self.modules[file]
                        if module + (segments[0],) in self.files:
                            base, rest = list(module), segments
                        else:
                            continue
                    target = self.resolve(base, rest)
                    full = tuple(base) + tuple(rest)
                    if full in self.files:
                        aliases[alias] = full
                        continue
                    add(target, rest[-1] if rest else alias)
            body = USE.sub(";", code)
            for m in PATH.finditer(body):
                segments = [m.group(1)] + m.group(2).split("::")[1:]
                base, rest = self.absolute(file, segments)
                add(self.resolve(base, rest), rest[-1] if rest else "")
            for alias, module in aliases.items():
                for m in re.finditer(r"(?<![A-Za-z0-9_:])" + alias + r"((?:::" + IDENT + ")+)", body):
                    rest = m.group(1).split("::")[1:]
                    add(self.resolve(list(module), rest), rest[-1])
        return graph


def circles(graph):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return found


def members():
    workspace = tomllib.loads((ROOT / "Cargo.toml").read_text())
    for member in workspace["workspace"]["members"]:
        manifest = tomllib.loads((ROOT / member / "Cargo.toml").read_text())
        yield ROOT / member, manifest


def main():
    graph_only = "--graph" in sys.argv
    layer_of = {name: level for level, names in enumerate(LAYERS) for name in names}
    wrong = []
    for directory, manifest in members():
        name = manifest["package"]["name"]
        if name not in layer_of:
            wrong.append(f"{name} ({directory.relative_to(ROOT)}) has no layer in scripts/check-layers.py")
            continue
        for dependency in manifest.get("dependencies", {}):
            if dependency.startswith("weft-") and layer_of.get(dependency, 99) >= layer_of[name]:
                wrong.append(
                    f"{name} (layer {layer_of[name]}) depends on {dependency} "
                    f"(layer {layer_of.get(dependency, '?')}): a crate uses only lower layers"
                )
        for root in ("src/lib.rs", "src/main.rs"):
            if (directory / root).exists():
                crate = Crate(name, directory / root)
                graph = crate.edges()
                if graph_only:
                    for file in sorted(graph):
                        for target, names in sorted(graph[file].items()):
                            print(f"{file.relative_to(ROOT)} -> {target.relative_to(ROOT)}: {', '.join(sorted(names))}")
                for component in circles(graph):
                    lines = [f"an import circle in {name}: " + ", ".join(str(f.relative_to(ROOT)) for f in component)]
                    for file in component:
                        for target, names in sorted(graph[file].items()):
                            if target in component:
                                lines.append(
                                    f"  {file.relative_to(ROOT)} -> {target.relative_to(ROOT)}: {', '.join(sorted(names))}"
                                )
                    wrong.append("\n".join(lines))
    if graph_only:
        return 0
    for problem in wrong:
        print(problem, file=sys.stderr)
    if wrong:
        return 1
    print(f"layers: {sum(len(layer) for layer in LAYERS)} crates in {len(LAYERS)} layers, no import circle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
