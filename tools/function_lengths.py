#!/usr/bin/env python3
# Functions longer than a limit (default 80 lines) under a source folder, longest first: the rough check
# behind the convention "under ~80 lines unless its comment says why" (docs/architecture.md, Conventions).
# Brace matching over comment- and string-stripped text, so good enough, not a parser: a function body is a
# "{" after ")" (and const/override/noexcept/-> type) that is not inside another function.
#   python3 tools/function_lengths.py src [80]
import re, sys, pathlib
root = pathlib.Path(sys.argv[1]); limit = int(sys.argv[2]) if len(sys.argv) > 2 else 80
def strip(text):
    # remove comments, strings, char literals, keep newlines
    out = []; i = 0; n = len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i); j = n if j < 0 else j; out.append(' ' * (j - i)); i = j
        elif text.startswith('/*', i):
            j = text.find('*/', i); j = n if j < 0 else j + 2; out.append(''.join('\n' if ch == '\n' else ' ' for ch in text[i:j])); i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:]); d = m.group(1); j = text.find(')' + d + '"', i); j = j + len(d) + 2
            out.append(''.join('\n' if ch == '\n' else ' ' for ch in text[i:j])); i = j
        elif c == '"' or (c == "'" and not (i > 0 and text[i-1].isalnum())):
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            out.append(' ' * (j + 1 - i)); i = j + 1
        else:
            out.append(c); i += 1
    return ''.join(out)
found = []
for f in sorted(list(root.rglob('*.cpp')) + list(root.rglob('*.h'))):
    t = strip(f.read_text())
    # find '{' preceded by ')' (optionally const/override/noexcept/-> type) = function body
    depth = 0; stack = []
    for m in re.finditer(r'[{}]', t):
        if m.group() == '{':
            before = t[max(0, m.start() - 300):m.start()]
            isfn = re.search(r'\)\s*(const|override|noexcept|final|mutable|->\s*[\w:<>,\s*&]+|\s)*$', before) is not None
            head = re.search(r'(\w+)\s*\([^;{}]*\)[^;{}()]*$', before)
            kw = head.group(1) if head else ''
            if kw in ('if', 'for', 'while', 'switch', 'catch') : isfn = False
            stack.append((m.start(), isfn, kw))
        else:
            if not stack: continue
            s, isfn, kw = stack.pop()
            if isfn and not any(x[1] for x in stack):
                l0 = t.count('\n', 0, s) + 1; l1 = t.count('\n', 0, m.start()) + 1
                if l1 - l0 + 1 > limit:
                    found.append((l1 - l0 + 1, f"{f}:{l0} {kw}"))
for n, where in sorted(found, reverse=True):
    print(f"{n:4d} {where}")
