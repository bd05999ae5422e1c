#!/usr/bin/env python3
"""Checks the documentation's links and the code's references to it (docs/building.md,
"Documentation checks"). Python 3 standard library only: it runs in CI as the ctest
`docs_links` (tests/docs/CMakeLists.txt).

  python3 tools/check_docs.py [--root DIR] [--max-readme-lines N]

Checks, under DIR (default: the repository holding this script):
  1. README.md has at most N lines (default 300): it is a front page, the manual is docs/.
  2. In every Markdown file, every relative link or image `[text](target)` resolves to a
     file or folder that exists, and a `#anchor` to a heading of the target file (GitHub's
     anchors). Every `path/with/a/slash.ext` written as inline code names a file that
     exists (from DIR or from the Markdown file's folder), so moved files are followed.
  3. In the code (sources, CMake, scripts, configs), every reference to a Markdown file
     (`docs/training.md`, `llm/README.md`, `README.md`, or the bare `README`) names a file
     that exists, and a section given after it in double quotes
     (`(docs/training.md, "Numerics")`, also across a comment's line break) is a heading of
     that file; a capitalised word right after a reference (`README, Numerics`) is taken
     for a section named without quotes and refused, since it cannot be checked.
Each problem is one line `FILE:LINE: message` on stderr; the exit status is 1 when there
is any, 2 on bad arguments, 0 otherwise.
"""
import argparse
import os
import re
import sys

SKIP_DIRS = {".git", "out", "node_modules", "__pycache__"}
# Fixtures: the Hugging Face test checkpoints, and this tool's own broken examples (its
# test runs it on that folder alone).
SKIP_PATHS = {os.path.join("tests", "data", "hf_tiny"), os.path.join("tests", "docs", "fixture")}
CODE_EXT = {".h", ".hpp", ".c", ".cc", ".cpp", ".inc", ".cu", ".cuh", ".py", ".sh", ".cmake", ".cfg", ".txt"}
CODE_NAMES = {"run", "CMakeLists.txt"}
INLINE_PATH_EXT = ("h", "hpp", "c", "cpp", "inc", "cu", "cuh", "py", "sh", "cfg", "cmake", "md", "png", "txt")

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"(`+)(.+?)\1", re.S)
INLINE_PATH = re.compile(r"^[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+\.(?:" + "|".join(INLINE_PATH_EXT) + r")$")
# A reference to the documentation in code: docs/<file>.md, <folder>/README.md, or README.md
# and the bare word README, both the top-level one. Other .md names (a command's output
# files) and absolute or ${VAR}/ paths are not references.
CODE_REF = re.compile(r"(?<![\w/.${}-])((?:[\w-]+/)*docs/[\w.-]+\.md|(?:[\w-]+/)*README(?:\.md)?)(?![\w.-]*\w)")
# What may stand between a reference and its quoted section: a comma, blanks, and where
# a comment wraps, the next line's comment leader.
SECTION_AFTER = re.compile(r'(?:,?[ \t]*(?:\n[ \t]*(?://+|#+|\*|;+)?[ \t]*)?)"([^"\n]{1,120})"')
UNQUOTED_AFTER = re.compile(r",?[ \t]+(?:\n[ \t]*(?://+|#+|\*)[ \t]*)?([A-Z][a-z]+(?: [a-z]+)*)\b")


def slug(text):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|__", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def strip_fences(lines):
    """The lines with fenced code blanked (line numbers kept)."""
    out, fenced = [], False
    for line in lines:
        if FENCE.match(line):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return out


class Markdown:
    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            self.lines = f.read().split("\n")
        self.prose = strip_fences(self.lines)
        self.headings, self.anchors = [], set()
        seen = {}
        for line in self.prose:
            m = HEADING.match(line)
            if not m:
                continue
            text = m.group(2)
            self.headings.append(text)
            base = slug(text)
            n = seen.get(base, 0)
            seen[base] = n + 1
            self.anchors.add(base if n == 0 else f"{base}-{n}")

    def has_section(self, name):
        bare = name.replace("`", "")
        return any(h == name or h.replace("`", "") == bare for h in self.headings)


class Checker:
    def __init__(self, root, max_readme_lines):
        self.root = os.path.abspath(root)
        self.max_readme_lines = max_readme_lines
        self.problems = []
        self.cache = {}
        self.counts = {"markdown": 0, "links": 0, "paths": 0, "references": 0}
        self.self_path = os.path.abspath(__file__)  # its documentation quotes bad examples

    def rel(self, path):
        return os.path.relpath(path, self.root)

    def problem(self, path, line, message):
        self.problems.append(f"{self.rel(path)}:{line}: {message}")

    def markdown(self, path):
        path = os.path.normpath(path)
        if path not in self.cache:
            self.cache[path] = Markdown(path)
        return self.cache[path]

    def walk(self):
        for top, dirs, files in os.walk(self.root):
            rel_top = os.path.relpath(top, self.root)
            dirs[:] = sorted(d for d in dirs
                             if d not in SKIP_DIRS and not d.startswith("build")
                             and not (d.startswith(".") and d != ".ci")
                             and os.path.normpath(os.path.join(rel_top, d)) not in SKIP_PATHS)
            for name in sorted(files):
                yield os.path.join(top, name)

    def resolve(self, base_dir, target):
        for start in (base_dir, self.root):
            p = os.path.normpath(os.path.join(start, target))
            if os.path.exists(p):
                return p
        return None

    # 1.
    def check_readme(self):
        path = os.path.join(self.root, "README.md")
        if not os.path.isfile(path):
            self.problem(path, 0, "missing: the front page README.md")
            return
        n = len(self.markdown(path).lines)
        if self.markdown(path).lines[-1] == "":
            n -= 1
        if n > self.max_readme_lines:
            self.problem(path, n, f"README.md has {n} lines, more than {self.max_readme_lines}: "
                                  "move the detail into a docs/ file and link it")

    # 2.
    def check_markdown(self, path):
        self.counts["markdown"] += 1
        md = self.markdown(path)
        here = os.path.dirname(path)
        text = "\n".join(md.prose)
        no_code = INLINE_CODE.sub(lambda m: " " * len(m.group(0)), text)
        for m in LINK.finditer(no_code):
            line = text.count("\n", 0, m.start()) + 1
            target = m.group(2)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            self.counts["links"] += 1
            file_part, _, anchor = target.partition("#")
            dest = path if not file_part else os.path.normpath(os.path.join(here, file_part))
            if not os.path.exists(dest):
                self.problem(path, line, f"link to '{target}': {self.rel(dest)} does not exist")
                continue
            if anchor and dest.endswith(".md") and os.path.isfile(dest):
                if anchor not in self.markdown(dest).anchors:
                    self.problem(path, line, f"link to '{target}': {self.rel(dest)} has no heading "
                                             f"with the anchor #{anchor}")
        for m in INLINE_CODE.finditer(text):
            token = m.group(2).strip()
            if not INLINE_PATH.match(token):
                continue
            self.counts["paths"] += 1
            if self.resolve(here, token) is None:
                line = text.count("\n", 0, m.start()) + 1
                self.problem(path, line, f"`{token}` names a file that does not exist")

    # 3.
    def check_code(self, path):
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except UnicodeDecodeError:
            return
        here = os.path.dirname(path)
        for m in CODE_REF.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            name = m.group(1)
            if name in ("README", "README.md"):
                dest = os.path.join(self.root, "README.md")
            else:
                dest = self.resolve(here, name if name.endswith(".md") else name + ".md")
            self.counts["references"] += 1
            if dest is None or not os.path.isfile(dest):
                self.problem(path, line, f"'{name}' names a Markdown file that does not exist")
                continue
            after = text[m.end():m.end() + 200]
            s = SECTION_AFTER.match(after)
            if s:
                section = s.group(1)
                if not self.markdown(dest).has_section(section):
                    self.problem(path, line, f"{self.rel(dest)} has no section \"{section}\"")
                continue
            u = UNQUOTED_AFTER.match(after)
            if u:
                self.problem(path, line, f"'{name}' is followed by '{u.group(1)}': name a section in "
                                         f"double quotes ({name}, \"Section\") so that it can be checked")

    def run(self):
        self.check_readme()
        for path in self.walk():
            name = os.path.basename(path)
            if name.endswith(".md"):
                self.check_markdown(path)
            elif (name in CODE_NAMES or os.path.splitext(name)[1] in CODE_EXT) and path != self.self_path:
                self.check_code(path)
        return self.problems


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.dirname(here), help="the repository (default: %(default)s)")
    ap.add_argument("--max-readme-lines", type=int, default=300)
    args = ap.parse_args()
    if not os.path.isdir(args.root):
        print(f"check_docs: --root {args.root}: not a folder", file=sys.stderr)
        return 2
    checker = Checker(args.root, args.max_readme_lines)
    problems = checker.run()
    for p in problems:
        print(p, file=sys.stderr)
    c = checker.counts
    summary = (f"{c['markdown']} Markdown files, {c['links']} links, {c['paths']} inline paths, "
               f"{c['references']} code references")
    if problems:
        print(f"check_docs: {len(problems)} problems ({summary})", file=sys.stderr)
        return 1
    print(f"check_docs: ok ({summary})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
