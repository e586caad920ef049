#!/usr/bin/env python3
"""Check that every relative link in README.md and docs/*.md resolves.

A link's file must exist (relative to the page that links it) and, with a #anchor into a
Markdown page, the page must have a heading with that GitHub-style anchor. Links inside code
blocks and absolute URLs are not checked. Run from the repository root; exits 1 when a link is
broken, so it can gate a change.
"""
import glob
import os
import re
import sys


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace('`', '')
    return re.sub(r'[^\w\- ]', '', text).replace(' ', '-')


def lines_outside_code(path):
    fence = False
    with open(path, encoding='utf-8') as f:
        for number, line in enumerate(f, 1):
            if line.startswith('```'):
                fence = not fence
            elif not fence:
                yield number, line


def anchors(path):
    return {slug(line.lstrip('#')) for _, line in lines_outside_code(path) if line.startswith('#')}


def broken_links(page):
    for number, line in lines_outside_code(page):
        for target in re.findall(r'\]\(([^)\s]+)\)', line):
            if re.match(r'[a-z]+:', target):
                continue
            path, _, anchor = target.partition('#')
            dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(dest):
                yield f'{page}:{number}: {target}: no such file'
            elif anchor and dest.endswith('.md') and anchor not in anchors(dest):
                yield f'{page}:{number}: {target}: no heading #{anchor} in {dest}'


def main():
    pages = ['README.md'] + sorted(glob.glob('docs/*.md'))
    problems = [p for page in pages for p in broken_links(page)]
    print('\n'.join(problems + [f'{len(pages)} pages, {len(problems)} broken links']))
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
